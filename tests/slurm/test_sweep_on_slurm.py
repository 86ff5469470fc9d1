"""A real `launcher=slurm budget=smoke` sweep on the one-node cluster: BC as its
own job, the cells depending on it with afterok, every cell done, each summary carrying the
SLURM job id it ran under."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_smoke_sweep_completes_on_slurm(slurm_cluster, tmp_path):
    cmd = [sys.executable, "-m", "arena.cli", "sweep", "dimension=aggregation", "budget=smoke", "seeds=1",
           "launcher=slurm_ci", f"results_dir={tmp_path}", "progress_s=5"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summaries = sorted((tmp_path / "sweeps" / "aggregation-smoke" / "cells").glob("*/summary.json"))
    assert len(summaries) == 2  # grpo, grpo_st x 1 env x 1 seed
    for path in summaries:
        summary = json.loads(path.read_text())
        assert summary["slurm_job_id"], summary  # it ran under SLURM, not locally
        assert summary["git_sha"] is not None or summary["git_dirty"] is None
    assert (tmp_path / "sweeps" / "aggregation-smoke" / "report" / "table.md").exists()
