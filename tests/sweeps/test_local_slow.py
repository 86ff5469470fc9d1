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


def test_killed_worker_fails_its_cell_and_the_rest_finish(tmp_path):
    """kill -9 the worker running a cell: that cell fails ("the job died", exit 1), every other
    cell finishes once (a new worker takes the place of the dead one); the rerun runs only it."""
    args = ["dimension=advantage", "seeds=2", "launcher=local", "progress_s=1", f"results_dir={tmp_path}", "budget=smoke"]
    driver = _driver(args, _env(3))
    cells = tmp_path / "sweeps" / "advantage-smoke" / "cells"
    deadline, victim = time.time() + 120, None
    while time.time() < deadline and victim is None:
        for hb in cells.glob("*/.heartbeat"):
            try:
                victim = (hb.parent, int(hb.read_text().split()[1]))
            except (OSError, IndexError, ValueError):
                continue
            break
        time.sleep(0.1)
    assert victim, "no cell started"
    os.kill(victim[1], signal.SIGKILL)  # the worker process (it holds the cell's lock)
    out = driver.communicate(timeout=240)[0]
    assert driver.returncode == 1, out
    assert "the job died" in (victim[0] / "error.txt").read_text()
    m = json.loads((tmp_path / "sweeps" / "advantage-smoke" / "manifest.json").read_text())
    killed = [c["cell_id"] == victim[0].name for c in m["cells"]]
    calls, done = _calls_per_cell(tmp_path, "advantage-smoke")
    assert calls == [1] * 6 and done == [not k for k in killed]
    rerun = _driver(args, _env(0))
    out = rerun.communicate(timeout=240)[0]
    assert rerun.returncode == 0, out
    calls, done = _calls_per_cell(tmp_path, "advantage-smoke")
    assert calls == [1 + k for k in killed] and all(done)
