"""A new user's bad day, end to end through `arena sweep` (docs/design.md, Run folder): the
sweep is killed at chosen and at random moments and its files are damaged between runs; after
the last rerun its results equal an undisturbed sweep of the same config.

Kills (SIGKILL, as a preemption or an OOM kill does it; ARENA_CRASH_AT picks the moment inside
the process, arena/io/faults.py): before a cell's first checkpoint, during a checkpoint write,
during summary.json's write (twice), and once after a random delay. Damage between runs: a done cell's
summary.json emptied, another's cut in half, a torn half row appended to a metrics.jsonl.

Slow: budget=smoke, 2 arms x 2 seeds, launcher=debug (cells run in the driver's process, so a
crash point kills the whole sweep). Wall-time budget: <= 4 min on 2 cores (measured 126-144 s on a shared 2-core machine).
ARENA_TEST_SEED picks the random kill's delay (default 0)."""
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arena.runs import RunFolder
from arena.sweeps.status import arm_summary_rows

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
# reuse=false: "storm" trains its own cells (it would copy calm's finished twins: arena/sweeps/twins.py)
ARGS = ["dimension=aggregation", "budget=smoke", "seeds=2", "launcher=debug", "wandb.enabled=false", "progress_s=5",
        "reuse=false"]
SCORES = ("final_eval_success", "initial_eval_success", "var_last20", "noise_floor", "stable", "status", "steps")


def _sweep(results: Path, name: str, crash_at: str = "", **popen) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "ARENA_CRASH_AT": crash_at}
    return subprocess.Popen([sys.executable, "-m", "arena.cli", "sweep", *ARGS, f"name={name}", f"results_dir={results}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **popen)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out = proc.communicate(timeout=600)[0]
    return proc.returncode, out


def _cells(results: Path, name: str) -> dict[str, RunFolder]:
    manifest = json.loads((results / "sweeps" / name / "manifest.json").read_text())
    return {c["cell_id"]: RunFolder(results / "sweeps" / name / "cells" / c["cell_id"]) for c in manifest["cells"]}


def _rows(run: RunFolder) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in run.read_metrics()]


def test_killed_and_damaged_sweep_ends_equal_to_an_undisturbed_one(tmp_path):
    results = tmp_path / "results"
    code, out = _finish(_sweep(results, "calm"))
    assert code == 0, out[-3000:]

    # 1. killed right after a cell's first metrics row (step 0): before its first checkpoint
    code, out = _finish(_sweep(results, "storm", crash_at="metrics.jsonl:1"))
    assert code == -signal.SIGKILL, out[-3000:]
    first = next(run for run in _cells(results, "storm").values() if run.metrics_file.exists())
    assert not (first.ckpt / "state.pt").exists()
    # 2. killed while writing the 2nd checkpoint (temp file written, not yet renamed into place)
    code, out = _finish(_sweep(results, "storm", crash_at="state.pt:2"))
    assert code == -signal.SIGKILL, out[-3000:]
    assert list(first.ckpt.glob(".state.pt.*.tmp"))  # the half-done write, left by the kill
    # 3. killed while writing summary.json
    code, out = _finish(_sweep(results, "storm", crash_at="summary.json:1"))
    assert code == -signal.SIGKILL, out[-3000:]
    assert list(first.path.glob(".summary.json.*.tmp")) and not first.summary_file.exists()
    # 4. a random moment
    delay = random.Random(int(os.environ.get("ARENA_TEST_SEED", "0"))).uniform(2.0, 12.0)
    proc = _sweep(results, "storm")
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    _finish(proc)
    # 5. killed while writing the second summary.json of a run, so at least one cell is done
    # whatever the random kill hit (or the run finishes: rc 0)
    code, out = _finish(_sweep(results, "storm", crash_at="summary.json:2"))
    assert code in (0, -signal.SIGKILL), out[-3000:]
    # 6. damage between runs: one summary emptied, one cut in half, a torn row on a metrics file
    done = [run for run in _cells(results, "storm").values() if run.done]
    assert done, "no cell finished yet: the damage below needs one"
    done[0].summary_file.write_text("")
    if len(done) > 1:
        text = done[1].summary_file.read_text()
        done[1].summary_file.write_text(text[: len(text) // 2])
    with open(done[-1].metrics_file, "a") as fh:
        fh.write('{"step": 99, "eval/succ')
    status = subprocess.run([sys.executable, "-m", "arena.cli", "status", "name=storm", f"results_dir={results}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "is not valid JSON" in status.stdout  # shown as not done, with why

    # 7. the rerun finishes every cell
    code, out = _finish(_sweep(results, "storm"))
    assert code == 0, out[-3000:]
    calm, storm = _cells(results, "calm"), _cells(results, "storm")
    assert calm.keys() == storm.keys()
    for cid in calm:
        assert storm[cid].done, cid
        assert [r["step"] for r in storm[cid].read_metrics()] == [0, 1, 2, 3]  # each step once
        assert _rows(storm[cid]) == _rows(calm[cid]), cid
        assert {k: storm[cid].summary()[k] for k in SCORES} == {k: calm[cid].summary()[k] for k in SCORES}, cid
    assert len(list(done[0].path.glob("summary.json.corrupt-*"))) == 1  # set aside, kept
    assert arm_summary_rows(results, "storm") == arm_summary_rows(results, "calm")
    table = lambda name: (results / "sweeps" / name / "report" / "table.md").read_text().replace(name, "NAME")  # noqa: E731
    assert table("storm") == table("calm")
