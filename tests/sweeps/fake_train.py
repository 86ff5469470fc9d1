"""A fake `train_fn(cfg) -> exit code` for orchestrator tests: writes metrics and a summary
through RunFolder, and appends one line per call to `<cell>/calls.log` (to count runs).

Behaviour from environment variables (read inside the job):
  FAKE_SLEEP=seconds        sleep before finishing (to keep a cell busy)
  FAKE_FAIL_ARMS=a,b        raise in these arms
  FAKE_UNSTABLE_EPS=x,y     a run is unstable iff its resolved po.hp.eps_high is in this list
  FAKE_FINALS=JSON          {"arm": [final score of seed 0, seed 1, ...]}: those scores, with
                            initial_eval_success FAKE_START (default 0.3)
  FAKE_INTERRUPT_AT=n       the n-th call (counted in <results_dir>/all_calls.log) raises
                            KeyboardInterrupt, as if the driver were killed mid-run
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

# A summary.json with every field a valid one carries (arena.runs.layout.SUMMARY_FIELDS)
VALID_SUMMARY = {"status": "done", "final_eval_success": 0.5, "var_last20": 0.0, "noise_floor": 0.0, "theta": 0.0025,
                 "stable": True, "n_eval": 8, "steps": 3, "wall_seconds": 0.0, "git_sha": None, "git_dirty": None,
                 "versions": {}, "host": "fake", "slurm_job_id": None}


def write_valid_summary(cell_dir) -> None:
    """A valid summary of the cell whose folder is `cell_dir` (a sweep cell's folder is named by
    its id, which the summary names: without it only a matching config.yaml would prove it)."""
    (Path(cell_dir) / "summary.json").write_text(json.dumps({**VALID_SUMMARY, "cell_id": Path(cell_dir).name}))


def train(cfg) -> int:
    from arena.config import resolve_po
    from arena.runs import RunFolder

    run = RunFolder(cfg.out).create()
    with open(Path(cfg.out) / "calls.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    with open(Path(cfg.results_dir) / "all_calls.log", "a") as fh:
        fh.write(f"{cfg.out}\n")
    n_calls = len((Path(cfg.results_dir) / "all_calls.log").read_text().split())
    if n_calls == int(os.environ.get("FAKE_INTERRUPT_AT", "0")):
        raise KeyboardInterrupt("fake kill")
    if cfg.arm in os.environ.get("FAKE_FAIL_ARMS", "").split(","):
        raise RuntimeError(f"fake failure in arm {cfg.arm}")
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    hp = resolve_po(cfg).hp
    unstable_eps = [float(x) for x in os.environ.get("FAKE_UNSTABLE_EPS", "").split(",") if x]
    unstable = hp.get("eps_high") in unstable_eps
    run.reset_metrics(None)  # no checkpoint: start the rows over, as the trainers do on a rerun
    run.append_metrics({"step": 1, "eval/success_rate": 0.5})
    # score = 0.5 + eps_high (when set), so "best" prefers a larger eps_high among stable points
    score = 0.5 + float(hp.get("eps_high", 0.0))
    finals = json.loads(os.environ.get("FAKE_FINALS") or "{}")
    if cfg.arm in finals:
        score = float(finals[cfg.arm][cfg.seed])
    # every field a valid summary.json carries (arena.runs.layout.SUMMARY_FIELDS), else it is no proof
    run.write_summary({"status": "done", "cell_id": Path(cfg.out).name, "final_eval_success": score, "var_last20": 0.01 if unstable else 0.0,
                       "noise_floor": 0.0, "theta": 0.0025, "n_eval": 8, "wall_seconds": 0.0,
                       "stable": not unstable, "steps": cfg.steps, "git_sha": os.environ.get("ARENA_GIT_SHA"),
                       "git_dirty": os.environ.get("ARENA_GIT_DIRTY"), "versions": {}, "host": "fake",
                       "slurm_job_id": None, "initial_eval_success": float(os.environ.get("FAKE_START", "0.3"))})
    return 0


def bc(cfg) -> str:
    marker = Path(cfg.results_dir) / "bc_calls.log"
    with open(marker, "a") as fh:
        fh.write(f"{cfg.env.name}\n")
    return str(marker)
