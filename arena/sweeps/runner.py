"""Running a sweep's cells: the BC stage, then the cells through the one driver loop
(driver.drive), which launches the cells that are not done, keeps `parallel` jobs in flight,
waits for cells held by other live processes, and prints progress (done/running/failed, ETA).

With a `pool_dir` (the local launcher) the jobs are workers that each run many cells
(pool.WorkerPool, worker.py); otherwise (debug, SLURM) each job runs one cell (OneJobPerCell).

The driver holds no lock: each job locks its own cell (arena/runs/lock.py), so a killed driver, or two
drivers at once, never run a cell twice. A job that finds its cell busy returns "busy"; the
driver then waits for that cell's summary.json or error.txt.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Callable, Optional

from arena.runs import RunFolder, provenance
from arena.runs.run_log import COMMAND_ENV, current_command

from .driver import Progress, drive
from .job import run_bc, run_cell
from .launchers import submit
from .ledger import BUSY, DONE, FAILED, cell_state
from .plan import Cell
from .pool import run_pool

POLL_S = 0.2


def wait_done(job, poll_s: float = 0.02) -> None:
    """Until the job ended (submitit's own wait() polls once a second)."""
    while not job.done():
        time.sleep(poll_s)


def provenance_env() -> dict[str, str]:
    """Recorded once by the driver at submit time; jobs read it (arena.runs.provenance)."""
    sha, dirty = provenance.git_state()
    # the sweep's command line, which each cell's command.txt records (arena.runs.run_log)
    return {"ARENA_GIT_SHA": sha or "", "ARENA_GIT_DIRTY": "1" if dirty else "0", COMMAND_ENV: current_command()}


def _outcome(job, cell: Cell) -> str:
    """The job's returned outcome; a job that died (killed, OOM, timeout) counts as failed."""
    try:
        return job.result()
    except Exception as exc:  # submitit's UncompletedJobError / FailedJobError
        folder = RunFolder(cell.out)
        if cell_state(cell.out) != DONE and not folder.error_file.exists():
            folder.path.mkdir(parents=True, exist_ok=True)
            folder.write_error(f"the job died before the cell finished:\n{exc}\n")  # atomic
        return DONE if cell_state(cell.out) == DONE else FAILED


def run_bc_stage(cfgs: list, *, executor, env: dict, threads: int, bc_fn: Optional[Callable], wait: bool,
                 log: Callable, parallel: int = 1) -> list:
    """One BC job per distinct BC config, at most `parallel` running at once (the same limit as
    the cells: sweep.sweep_parallelism). A job that ends frees its slot for the next; its result
    is logged (a failed BC raises). With `wait` False (SLURM afterok) the last `parallel` jobs are
    returned still running; otherwise every job has ended."""
    jobs, running = [], []
    for cfg in cfgs:
        while len(running) >= max(1, parallel):
            running = _still_running(running, log)
            if len(running) >= max(1, parallel):
                time.sleep(POLL_S)
        job = submit(executor, functools.partial(run_bc, cfg, env=env, threads=threads, bc_fn=bc_fn))
        jobs.append(job)
        running.append(job)
    while wait and running:
        running = _still_running(running, log)
        if running:
            time.sleep(POLL_S)
    return jobs


def _still_running(jobs: list, log: Callable) -> list:
    """The jobs not done yet; each done one's result is logged (raises if the BC failed)."""
    left = []
    for job in jobs:
        if job.done():
            log(f"[sweep] BC stage: {job.result()}")
        else:
            left.append(job)
    return left


class OneJobPerCell:
    """The driver loop's units (driver.Units) for the debug and SLURM launchers: one submitit
    job per cell, at most `parallel` at once. A cell found done or busy when its turn comes is
    resolved without a job."""

    def __init__(self, executor, *, parallel: int, env: dict, threads: Optional[int], train_fn: Optional[Callable]):
        self.executor, self.parallel = executor, parallel
        self.env, self.threads, self.train_fn = env, threads, train_fn
        self.pending: list[Cell] = []
        self.running: dict[str, tuple[Cell, object, float]] = {}  # cell_id -> (cell, job, start time)
        self.ready: list[tuple[Cell, str, Optional[float]]] = []  # resolved at launch time

    def add(self, cells: list[Cell]) -> None:
        self.pending.extend(cells)

    def collect(self, outcome: dict[str, str]) -> list[tuple[Cell, str, Optional[float]]]:
        results, self.ready = self.ready, []
        for cid, (cell, job, t0) in list(self.running.items()):
            if job.done():
                del self.running[cid]
                result = _outcome(job, cell)
                results.append((cell, result, None if result == BUSY else time.time() - t0))
        return results

    def launch(self, outcome: dict[str, str]) -> None:
        while self.pending and len(self.running) < self.parallel:
            cell = self.pending.pop(0)
            state = cell_state(cell.out)
            if state in (DONE, BUSY):
                self.ready.append((cell, state, None))
                continue
            job = submit(self.executor, functools.partial(run_cell, cell.cfg, env=self.env, threads=self.threads,
                                                          train_fn=self.train_fn))
            self.running[cell.cell_id] = (cell, job, time.time())

    def in_flight(self) -> int:
        return len(self.running)

    def cancel(self) -> None:
        for _, job, _ in self.running.values():
            job.cancel()

    def pause(self, waiting: bool) -> float:
        return POLL_S if (self.running or waiting) and not self.ready else 0.0


def run_cells(cells: list[Cell], *, executor, parallel: int, env: dict, threads: Optional[int] = None,
              train_fn: Optional[Callable] = None, fail_fast: bool = False, progress_s: float = 30.0,
              log: Callable = print, max_requeues: int = 3, pool_dir: Optional[Path] = None) -> dict[str, str]:
    """Run every cell that is not done; returns {cell_id: "done" | "failed" | "cancelled"}.
    With `pool_dir`, `parallel` workers run the cells (pool.WorkerPool); else one job per cell.
    Either way the loop is driver.drive."""
    progress = Progress(len(cells), parallel, progress_s, log)
    if pool_dir is not None:
        return run_pool(cells, executor=executor, pool_dir=pool_dir, parallel=parallel, env=env, threads=threads,
                        train_fn=train_fn, fail_fast=fail_fast, progress=progress, max_requeues=max_requeues)
    units = OneJobPerCell(executor, parallel=parallel, env=env, threads=threads, train_fn=train_fn)
    return drive(cells, units, fail_fast=fail_fast, progress=progress, max_requeues=max_requeues)


def cell_dirs(cells: list[Cell]) -> list[Path]:
    return [c.out for c in cells]
