"""The driver loop: launch the cells that are not done, keep `parallel` jobs in flight, wait
for cells held by other live processes, and print progress (done/running/failed, ETA).

With a `pool_dir` (the local launcher) the jobs are workers that each run many cells
(pool.py, worker.py); otherwise (debug, SLURM) each job runs one cell.

The driver holds no lock: each job locks its own cell (ledger.py), so a killed driver, or two
drivers at once, never run a cell twice. A job that finds its cell busy returns "busy"; the
driver then waits for that cell's summary.json or error.txt.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Callable, Optional

from .job import run_bc, run_cell
from .launchers import submit
from .ledger import BUSY, DONE, FAILED, cell_state, settle_waiting
from .plan import Cell
from .pool import run_pool

POLL_S = 0.2


def wait_done(job, poll_s: float = 0.02) -> None:
    """Until the job ended (submitit's own wait() polls once a second)."""
    while not job.done():
        time.sleep(poll_s)


def provenance_env() -> dict[str, str]:
    """Recorded once by the driver at submit time; jobs read it (arena.runs.provenance)."""
    from arena.runs.provenance import git_state

    sha, dirty = git_state()
    return {"ARENA_GIT_SHA": sha or "", "ARENA_GIT_DIRTY": "1" if dirty else "0"}


def _outcome(job, cell: Cell) -> str:
    """The job's returned outcome; a job that died (killed, OOM, timeout) counts as failed."""
    try:
        return job.result()
    except Exception as exc:  # submitit's UncompletedJobError / FailedJobError
        err = cell.out / "error.txt"
        if cell_state(cell.out) != DONE and not err.exists():
            err.parent.mkdir(parents=True, exist_ok=True)
            err.write_text(f"the job died before the cell finished:\n{exc}\n")
        return DONE if cell_state(cell.out) == DONE else FAILED


class Progress:
    def __init__(self, total: int, parallel: int, every_s: float, log: Callable):
        self.total, self.parallel, self.every_s, self.log = total, parallel, every_s, log
        self.started = time.time()
        self.last = 0.0
        self.durations: list[float] = []

    def report(self, done: int, running: int, failed: int, *, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        remaining = self.total - done - failed
        if self.durations and remaining:
            # ETA = mean cell time * ceil(remaining / parallel)
            per_cell = sum(self.durations) / len(self.durations)
            eta = f"{per_cell * -(-remaining // max(1, self.parallel)):.0f}s"
        else:
            eta = "-" if remaining else "0s"
        self.log(f"[sweep] {done}/{self.total} done, {running} running, {failed} failed, "
                 f"elapsed {now - self.started:.0f}s, ETA {eta}")


def run_bc_stage(cfgs: list, *, executor, env: dict, threads: int, bc_fn: Optional[Callable], wait: bool,
                 log: Callable) -> list:
    """One BC job per distinct BC config; waits for them unless `wait` is False (SLURM afterok)."""
    jobs = [submit(executor, functools.partial(run_bc, cfg, env=env, threads=threads, bc_fn=bc_fn)) for cfg in cfgs]
    if wait:
        for job in jobs:
            wait_done(job)
            log(f"[sweep] BC stage: {job.result()}")
    return jobs


def run_cells(cells: list[Cell], *, executor, parallel: int, env: dict, threads: Optional[int] = None,
              train_fn: Optional[Callable] = None, fail_fast: bool = False, progress_s: float = 30.0,
              log: Callable = print, max_requeues: int = 3, pool_dir: Optional[Path] = None) -> dict[str, str]:
    """Run every cell that is not done; returns {cell_id: "done" | "failed" | "cancelled"}.
    With `pool_dir`, `parallel` workers run the cells (pool.run_pool); else one job per cell."""
    if pool_dir is not None:
        return run_pool(cells, executor=executor, pool_dir=pool_dir, parallel=parallel, env=env, threads=threads,
                        train_fn=train_fn, fail_fast=fail_fast, progress=Progress(len(cells), parallel, progress_s, log),
                        max_requeues=max_requeues)
    outcome: dict[str, str] = {}
    pending: list[Cell] = []
    for cell in cells:
        if cell_state(cell.out) == DONE:
            outcome[cell.cell_id] = DONE
        else:
            pending.append(cell)
    running: dict[str, tuple[Cell, object, float]] = {}
    waiting: dict[str, Cell] = {}  # held by another live process
    requeues: dict[str, int] = {}
    progress = Progress(len(cells), parallel, progress_s, log)
    failed = lambda: sum(v == FAILED for v in outcome.values())  # noqa: E731
    while pending or running or waiting:
        while pending and len(running) < parallel and not (fail_fast and failed()):
            cell = pending.pop(0)
            state = cell_state(cell.out)
            if state == DONE:
                outcome[cell.cell_id] = DONE
            elif state == BUSY:
                waiting[cell.cell_id] = cell
            else:
                job = submit(executor, functools.partial(run_cell, cell.cfg, env=env, threads=threads, train_fn=train_fn))
                running[cell.cell_id] = (cell, job, time.time())
        for cid, (cell, job, t0) in list(running.items()):
            if not job.done():
                continue
            del running[cid]
            result = _outcome(job, cell)
            if result == BUSY:
                waiting[cid] = cell
            else:
                outcome[cid] = result
                progress.durations.append(time.time() - t0)
        pending.extend(settle_waiting(waiting, outcome, requeues, max_requeues))  # holder died: launch it ourselves
        if fail_fast and failed():
            for cid, (cell, job, _) in running.items():
                job.cancel()
                outcome[cid] = "cancelled"
            for cell in pending + list(waiting.values()):
                outcome.setdefault(cell.cell_id, "cancelled")
            break
        done = sum(v == DONE for v in outcome.values())
        progress.report(done, len(running) + len(waiting), failed())
        if running or waiting:
            time.sleep(POLL_S)
    progress.report(sum(v == DONE for v in outcome.values()), 0, failed(), force=True)
    return outcome


def cell_dirs(cells: list[Cell]) -> list[Path]:
    return [c.out for c in cells]
