"""Real `budget=smoke` sweeps through the `arena sweep` entry point (embedded trainer). Slow:
minutes on 2 cores."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _sweep(args, env=None, **kw):
    cmd = [sys.executable, "-c", "import sys; from arena.sweeps.cli import sweep_main; sys.exit(sweep_main(sys.argv[1:]))", *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "WANDB_MODE": "disabled", **(env or {})}, **kw)


def test_main_job_is_clipping_smoke(tmp_path):
    """12 cells = 6 arms x 1 env x 2 seeds; the table has one row per arm."""
    proc = _sweep(["dimension=is_clipping", "budget=smoke", "seeds=2", f"results_dir={tmp_path}", "progress_s=10"])
    out = proc.communicate(timeout=3600)[0]
    assert proc.returncode == 0, out[-4000:]
    assert len(list((tmp_path / "sweeps" / "is_clipping-smoke" / "cells").glob("*/summary.json"))) == 12
    from arena.sweeps.status import arm_summary_rows

    rows = arm_summary_rows(tmp_path, "is_clipping-smoke")
    assert [r["arm"] for r in rows] == ["grpo", "gspo", "cispo", "sapo", "cispo_sm", "sapo_sm"]
    assert all(r["done"] == 2 for r in rows)


def test_kill_training_process_after_checkpoint_resumes(tmp_path):
    args = ["dimension=aggregation", "budget=smoke", "seeds=1", "steps=6", f"results_dir={tmp_path}", "progress_s=5"]
    proc = _sweep(args)
    cells = tmp_path / "sweeps" / "aggregation-smoke" / "cells"
    deadline = time.time() + 1800
    victim = None
    while time.time() < deadline and victim is None:  # the first cell whose metrics passed step 2
        for metrics in cells.glob("*/metrics.jsonl"):
            rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
            hb = metrics.parent / ".heartbeat"
            if rows and rows[-1]["step"] >= 2 and hb.exists():
                victim = (metrics.parent, int(hb.read_text().split()[1]))
                break
        time.sleep(0.5)
    assert victim, "no cell reached step 2"
    os.kill(victim[1], signal.SIGKILL)  # the training process of that cell
    proc.communicate(timeout=1800)
    assert proc.returncode == 1  # the killed cell counts as failed in this run
    rerun = _sweep(args)
    out = rerun.communicate(timeout=1800)[0]
    assert rerun.returncode == 0, out[-4000:]
    steps = [json.loads(x)["step"] for x in (victim[0] / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert steps == sorted(set(steps)) and steps[-1] == 6  # resumed: every step once


def _metrics(cell):
    """metrics.jsonl rows without the wall-clock fields (perf/*)."""
    rows = [json.loads(x) for x in (cell / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]


def test_a_cell_after_another_in_one_worker_matches_a_fresh_worker(tmp_path):
    """A local worker runs cell after cell in one process: grpo_st run second (after grpo, one
    worker) logs the same metrics, value for value, as grpo_st run first in a fresh worker."""
    grid = tmp_path / "only_st.yaml"
    grid.write_text("arms:\n  - {name: grpo_st, po.method: grpo_st}\n")
    env = {"ARENA_MAX_PARALLEL": "1"}
    second = _sweep(["dimension=aggregation", "budget=smoke", "seeds=1", f"results_dir={tmp_path / 'a'}"], env=env)
    out = second.communicate(timeout=1800)[0]
    assert second.returncode == 0, out[-4000:]
    first = _sweep([f"grid={grid}", "budget=smoke", "seeds=1", f"results_dir={tmp_path / 'b'}"], env=env)
    out = first.communicate(timeout=1800)[0]
    assert first.returncode == 0, out[-4000:]
    ma = json.loads((tmp_path / "a" / "sweeps" / "aggregation-smoke" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "sweeps" / "only_st-smoke" / "manifest.json").read_text())
    cell_a = next(c["cell_id"] for c in ma["cells"] if c["arm"] == "grpo_st")
    assert cell_a == mb["cells"][0]["cell_id"]  # the same config
    claims = list((tmp_path / "a" / "sweeps" / "aggregation-smoke" / "jobs" / "pool").glob("*/q0/claims/*"))
    assert sorted(c.read_text() for c in claims) == ["w0", "w0"]  # both cells in one worker, one process
    rows_a = _metrics(tmp_path / "a" / "sweeps" / "aggregation-smoke" / "cells" / cell_a)
    rows_b = _metrics(tmp_path / "b" / "sweeps" / "only_st-smoke" / "cells" / cell_a)
    # smoke: steps=3 and test_freq=1, so rows for the initial eval (step 0) and steps 1, 2, 3
    assert [r["step"] for r in rows_a] == [0, 1, 2, 3] and rows_a == rows_b
