"""Run `arena <verb> ...` in a subprocess for the slow verl tests: one thread, W&B off, no
inherited Ray cluster; stopped with SIGINT (so the run stops its Ray head) after a timeout."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def arena_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WANDB_MODE": "disabled", **extra}
    env.pop("RAY_ADDRESS", None)
    return env


def run_arena(args: list[str], *, timeout: float, env: dict | None = None) -> tuple[int, str]:
    """(exit code, output) of `python -m arena.cli ARGS`; fails the test after `timeout` s."""
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", *args], env=env or arena_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # run_training's finally blocks stop the Ray head
        log, _ = proc.communicate(timeout=120)
        pytest.fail(f"arena {' '.join(args[:3])} took over {timeout} s; last output:\n{log[-3000:]}")
    return proc.returncode, log


def metrics_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def failure_text(run_dir: Path, log: str) -> str:
    error = Path(run_dir) / "error.txt"
    return f"{log[-3000:]}\n{error.read_text()[-3000:] if error.exists() else ''}"
