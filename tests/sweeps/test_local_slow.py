"""The local (submitit subprocess) launcher: concurrent and killed drivers. Slow."""
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


def _driver(args, env):
    return subprocess.Popen([sys.executable, "-m", "tests.sweeps.fake_driver", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _env(sleep):
    return {**os.environ, "FAKE_SLEEP": str(sleep), "ARENA_HEARTBEAT_S": "0.5", "FAKE_FAIL_ARMS": "", "FAKE_UNSTABLE_EPS": ""}


def _calls_per_cell(tmp_path, name):
    m = json.loads((tmp_path / "sweeps" / name / "manifest.json").read_text())
    cells = tmp_path / "sweeps" / name / "cells"
    return [len((cells / c["cell_id"] / "calls.log").read_text().split()) if (cells / c["cell_id"] / "calls.log").exists()
            else 0 for c in m["cells"]], [(cells / c["cell_id"] / "summary.json").exists() for c in m["cells"]]


def test_two_drivers_never_run_a_cell_twice(tmp_path):
    args = ["dimension=advantage", "seeds=2", "launcher=local", "progress_s=1", f"results_dir={tmp_path}", "budget=smoke"]
    first, second = _driver(args, _env(2)), _driver(args, _env(2))
    outs = [p.communicate(timeout=240)[0] for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    calls, done = _calls_per_cell(tmp_path, "advantage-smoke")
    assert calls == [1] * 6 and all(done)  # 3 arms x 2 seeds, each trained exactly once


def test_kill_driver_then_rerun_runs_each_cell_once(tmp_path):
    args = ["dimension=advantage", "seeds=2", "launcher=local", "progress_s=1", f"results_dir={tmp_path}", "budget=smoke"]
    driver = _driver(args, _env(4))
    cells = tmp_path / "sweeps" / "advantage-smoke" / "cells"
    deadline = time.time() + 120
    while time.time() < deadline and not any(cells.glob("*/calls.log")):
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)  # its running jobs live on (submitit local jobs outlive it)
    driver.wait()
    rerun = _driver(args, _env(4))
    out = rerun.communicate(timeout=240)[0]
    assert rerun.returncode == 0, out
    calls, done = _calls_per_cell(tmp_path, "advantage-smoke")
    assert calls == [1] * 6 and all(done)
