"""Kill and resume a `backend=verl` run (slow): SIGKILL to the whole job right after verl's first
checkpoint, then the same command again.

What must hold: the killed job leaves no Ray process behind (its private head dies with its
parent: ray_head._die_with_parent); at the kill, metrics.jsonl holds the row of every step
up to the checkpoint's (a step's row is written before its checkpoint: trainer.py, run folder);
the rerun resumes from verl's checkpoint and ends with exactly one row per step (0..3, the
training rows with their actor metrics) and a complete summary.json.

Wall time 207 s on the shared 2-core box at load ~8 (the first attempt up to its first checkpoint,
~80 s, then a resumed run of ~110 s)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from arena.runs import RunFolder

from .verl_runs import arena_env, failure_text, metrics_rows, ray_head_session, run_arena, session_processes

pytest.importorskip("verl")
pytest.importorskip("ray")

FIRST_CKPT_TIMEOUT_S = 480
RESUME_TIMEOUT_S = 600
RAY_EXIT_TIMEOUT_S = 90


@pytest.mark.slow
def test_a_killed_verl_run_resumes_with_one_row_per_step(tmp_path, verl_bc_checkpoint):
    out = tmp_path / "run"
    args = ["train", "backend=verl", "env=sokoban", "budget=smoke", f"out={out}",
            f"results_dir={tmp_path / 'results'}", f"model.path={verl_bc_checkpoint}", "wandb.enabled=false"]
    tracker = out / "ckpt" / "latest_checkpointed_iteration.txt"
    with open(tmp_path / "first_attempt.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "arena.cli", *args], env=arena_env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    head_session = None
    try:
        deadline = time.monotonic() + FIRST_CKPT_TIMEOUT_S
        while not tracker.exists():
            head_session = head_session or ray_head_session(proc.pid)
            assert proc.poll() is None, (tmp_path / "first_attempt.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"no verl checkpoint after {FIRST_CKPT_TIMEOUT_S} s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the job's process group; the Ray head has its own session
        proc.wait()
    killed_at = int(tracker.read_text().strip())
    steps_then = [r["step"] for r in metrics_rows(out)]
    assert steps_then[: killed_at + 1] == list(range(killed_at + 1)), steps_then  # row k is there with ckpt k
    assert not (out / "summary.json").exists()

    # the head gets SIGTERM when its parent dies and stops its GCS, raylet and workers
    assert head_session is not None
    deadline = time.monotonic() + RAY_EXIT_TIMEOUT_S
    while session_processes(head_session) and time.monotonic() < deadline:
        time.sleep(1)
    left = session_processes(head_session)
    for pid in left:  # never leave them running, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"Ray processes left {RAY_EXIT_TIMEOUT_S} s after the kill: {left}"

    code, log = run_arena(args, timeout=RESUME_TIMEOUT_S)
    assert code == 0, failure_text(out, log)
    assert "Resuming from" in log  # verl loaded the checkpoint (its own log line)
    rows = metrics_rows(out)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert all("actor/pg_loss" in r and "rollout/turn_samples" in r for r in rows[1:])
    assert all("eval/success_rate" in r for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert RunFolder(out).done and summary["steps"] == 3 and summary["backend"] == "verl"
    assert (out / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
