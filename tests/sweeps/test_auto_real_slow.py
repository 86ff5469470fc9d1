"""`arena sweep ... seeds=auto` on a real `budget=smoke` sweep (the embedded trainer, the local
launcher), through the entry point. Slow: ~2-3 minutes on 2 cores (8 cells and 4 BC checkpoints).

Opt-in: it runs only when this file is named on pytest's command line
(`pytest -m slow tests/sweeps/test_auto_real_slow.py`), so that CI's slow stage does not grow;
the rounds' logic is covered by the fast tests of arena/sweeps/auto_seeds.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_seeds_auto_on_a_smoke_sweep(tmp_path, request):
    from tests.embedded.learning_runs import named_on_command_line

    if not named_on_command_line(request.config, __file__):
        pytest.skip("opt-in (~3 CPU-minutes): pytest -m slow tests/sweeps/test_auto_real_slow.py")
    args = ["dimension=aggregation", "budget=smoke", "seeds=auto", "max_seeds=4", f"results_dir={tmp_path}",
            "progress_s=10"]
    cmd = [sys.executable, "-c", "import sys; from arena.sweeps.cli import sweep_main; sys.exit(sweep_main(sys.argv[1:]))",
           *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    sweep = tmp_path / "sweeps" / "aggregation-smoke"
    manifest = json.loads((sweep / "manifest.json").read_text())
    record = manifest["auto_seeds"]
    assert record["complete"] is True and (record["first_seeds"], record["looks"]) == (3, 2)
    seeds = {arm: row["seeds"] for arm, row in record["arms"].items()}
    # 3 seeds first, at most one more (max_seeds 4); the baseline has every seed grpo_st has
    assert set(seeds) == {"grpo", "grpo_st"} and set(seeds.values()) <= {3, 4} and seeds["grpo"] >= seeds["grpo_st"]
    for row in record["arms"].values():
        assert row["reason"].startswith(("resolved at look", "reached max_seeds=4")), row
    # every cell of the manifest finished (its summary is the proof), one per arm and seed
    cells = [c for c in manifest["cells"] if c["role"] == "report"]
    assert sorted((c["arm"], c["seed"]) for c in cells) == sorted((a, s) for a, n in seeds.items() for s in range(n))
    assert all((sweep / "cells" / c["cell_id"] / "summary.json").exists() for c in cells)
    assert "seeds=auto look 1:" in out and "## Seeds (seeds=auto)" in (sweep / "report" / "table.md").read_text()
    # the same command again runs nothing and decides the same
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "WANDB_MODE": "disabled"})
    assert again.returncode == 0 and json.loads((sweep / "manifest.json").read_text()) == manifest
