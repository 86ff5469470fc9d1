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


def _stat(pid_dir: Path) -> tuple[str, int, int] | None:
    """(state, ppid, session id) of /proc/<pid>, None if it is gone."""
    try:
        fields = (pid_dir / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[3])


def ray_head_session(driver_pid: int) -> int | None:
    """The session id of the `ray start` child of `driver_pid` (it runs in a session of its own,
    with the GCS, the raylet and every Ray worker of the run), None before it started."""
    for pid_dir in Path("/proc").glob("[0-9]*"):
        stat = _stat(pid_dir)
        if stat and stat[1] == driver_pid:
            try:
                cmdline = (pid_dir / "cmdline").read_bytes()
            except OSError:
                continue
            if b"ray" in cmdline and b"start" in cmdline:
                return stat[2]
    return None


def session_processes(session: int) -> list[int]:
    """Live (not zombie) processes of a session."""
    out = []
    for pid_dir in Path("/proc").glob("[0-9]*"):
        stat = _stat(pid_dir)
        if stat and stat[2] == session and stat[0] != "Z":
            out.append(int(pid_dir.name))
    return out
