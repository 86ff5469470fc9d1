"""The local launcher's worker pool, in-process: claims, outcomes, busy cells, STOP, a dead
driver, and the driver loop (pool.run_pool) with submitit's debug executor as the workers."""
import subprocess

import pytest

from arena.sweeps.launchers import make_executor
from arena.runs.lock import CellLock
from arena.sweeps.pool import Queue, run_pool
from arena.sweeps.runner import Progress
from arena.sweeps.sweep import build_plan
from arena.sweeps.worker import STOP, claim, run_worker, write_outcome

from . import fake_train


@pytest.fixture
def plan(sweep_env):
    """advantage, 1 seed: 3 cells (grpo, gigpo, empg), in that order."""
    return build_plan(["dimension=advantage", "seeds=1", *sweep_env])[0]


def _queue(plan):
    return Queue(plan.sweep_dir / "jobs" / "pool" / "p" / "q0", plan.cells)


def _work(queue, name, pid=None, **kw):
    import os

    return run_worker(str(queue.folder), [c.cfg for c in queue.cells], worker=name, driver_pid=pid or os.getpid(),
                      env={}, train_fn=fake_train.train, **kw)


def _calls(cell):
    path = cell.out / "calls.log"
    return len(path.read_text().split()) if path.exists() else 0


def test_claim_is_exclusive_but_resumable_by_its_owner(plan):
    q = _queue(plan)
    assert claim(q.folder, "c1", "w0") and not claim(q.folder, "c1", "w1")
    assert claim(q.folder, "c1", "w0")  # w0 requeued (timeout/preemption): its unfinished cell is its own
    write_outcome(q.folder, "c1", "done", 1.5)
    assert not claim(q.folder, "c1", "w0")  # finished: never again
    assert q.claims() == {"c1": "w0"} and q.new_outcomes() == [("c1", {"outcome": "done", "seconds": 1.5})]
    assert q.new_outcomes() == []  # each outcome is read once


def test_worker_skips_claimed_cells_and_reports_busy_ones(plan):
    q = _queue(plan)
    grpo, gigpo, empg = plan.cells
    claim(q.folder, gigpo.cell_id, "w1")  # another worker of this driver has it
    with CellLock(empg.out) as held:  # a live process outside this driver holds empg
        assert held
        assert _work(q, "w0") == {grpo.cell_id: "done", empg.cell_id: "busy"}
    assert [_calls(c) for c in plan.cells] == [1, 0, 0]
    outcomes = dict(q.new_outcomes())
    assert {k: v["outcome"] for k, v in outcomes.items()} == {grpo.cell_id: "done", empg.cell_id: "busy"}
    assert q.claims() == {gigpo.cell_id: "w1", grpo.cell_id: "w0", empg.cell_id: "w0"}


def test_worker_stops_on_stop_file_and_without_its_driver(plan):
    q = _queue(plan)
    (q.folder.parent / STOP).touch()
    assert _work(q, "w0") == {}
    (q.folder.parent / STOP).unlink()
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid is no live process
    assert _work(q, "w0", pid=gone.pid) == {}
    assert [_calls(c) for c in plan.cells] == [0, 0, 0] and q.claims() == {}


def test_fail_fast_worker_writes_stop(plan, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_ARMS", "gigpo")
    q = _queue(plan)
    assert _work(q, "w0", fail_fast=True) == {plan.cells[0].cell_id: "done", plan.cells[1].cell_id: "failed"}
    assert (q.folder.parent / STOP).exists() and _calls(plan.cells[2]) == 0


def test_run_pool_runs_each_cell_once(plan, tmp_path):
    (plan.cells[1].out).mkdir(parents=True)
    fake_train.write_valid_summary(plan.cells[1].out)  # done before: not run
    executor = make_executor("debug", tmp_path / "jobs", timeout_min=None)
    lines = []
    outcome = run_pool(plan.cells, executor=executor, pool_dir=tmp_path / "pool", parallel=2, env={}, threads=None,
                       train_fn=fake_train.train, fail_fast=False, progress=Progress(3, 2, 0.0, lines.append),
                       max_requeues=3)
    assert outcome == {c.cell_id: "done" for c in plan.cells}
    assert [_calls(c) for c in plan.cells] == [1, 0, 1]
    assert lines[-1].startswith("[sweep] 3/3 done, 0 running, 0 failed")
