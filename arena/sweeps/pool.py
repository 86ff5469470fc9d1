"""The local launcher's units of work for the driver loop (driver.drive): a pool of worker
jobs (worker.py) per queue of cells.

One queue holds the cells that are not done; up to `parallel` workers (submitit local jobs)
claim its cells one after another, so a cell costs no process start. The driver follows the
ledger and the queue folders only:

  - an outcome file resolves its cell: done / failed, or busy (another live process holds it:
    the driver waits for the cell's summary.json or error.txt, as before);
  - a worker job that ended leaves its claimed cells without an outcome: they died with it
    (killed, OOM) and count as failed, with error.txt saying so;
  - unclaimed cells with fewer workers than cells on them get new workers (a worker that died
    is replaced), never more than `parallel` running in all;
  - a busy cell whose holder vanished without a trace goes to a new one-cell queue (at most
    `max_requeues` times).

The submitit timeout of a worker is `timeout_min x its queue's cells`: the launcher's
`timeout_min` stays a per-cell allowance.
"""
from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Callable, Optional

from arena.runs import RunFolder

from .driver import drive
from .launchers import submit
from .ledger import BUSY, DONE, FAILED, cell_state
from .plan import Cell
from .worker import CLAIMS, OUTCOMES, STOP, run_worker

# The driver polls every POLL_S while cells finish, backing off to IDLE_POLL_S when nothing happens.
POLL_S, IDLE_POLL_S = 0.02, 0.5


class Queue:
    def __init__(self, folder: Path, cells: list[Cell]):
        self.folder, self.cells = folder, cells
        self.by_id = {c.cell_id: c for c in cells}
        (folder / CLAIMS).mkdir(parents=True, exist_ok=True)
        (folder / OUTCOMES).mkdir(exist_ok=True)
        self.workers: dict[str, object] = {}  # worker name -> submitit job
        self.ended: set[str] = set()  # workers whose job ended (and whose claims were settled)
        self.read: set[str] = set()  # outcome files already counted
        self.owners: dict[str, str] = {}  # claim -> worker name (read once)
        self.futile = 0  # workers that ended without claiming a cell while cells were unclaimed

    def running(self) -> int:
        return sum(name not in self.ended for name in self.workers)

    def claims(self) -> dict[str, str]:
        """{cell_id: worker name} of every claim (a name is read once; "" while being written)."""
        for path in (self.folder / CLAIMS).iterdir():
            if not self.owners.get(path.name):
                try:
                    self.owners[path.name] = path.read_text()
                except OSError:
                    self.owners[path.name] = ""
        return self.owners

    def new_outcomes(self) -> list[tuple[str, dict]]:
        fresh = []
        for path in (self.folder / OUTCOMES).iterdir():
            if path.name.startswith(".") or path.name in self.read:
                continue
            self.read.add(path.name)
            fresh.append((path.name, json.loads(path.read_text())))
        return fresh


def _died(cell: Cell, job) -> str:
    """A cell whose worker ended without its outcome: failed, with the job's error in error.txt."""
    if cell_state(cell.out) == DONE:
        return DONE
    try:
        why = f"its worker returned {job.result()!r}" if job.paths.result_pickle.exists() else \
            "no result; the end of its log:\n" + ((job.stderr() or "") + (job.stdout() or ""))[-3000:]
    except Exception as exc:  # noqa: BLE001 - the worker's own exception, with its traceback
        why = str(exc)
    cell.out.mkdir(parents=True, exist_ok=True)
    RunFolder(cell.out).write_error(f"the job died before the cell finished ({why})\n")  # atomic
    return FAILED


class WorkerPool:
    """The driver loop's units (driver.Units) for the local launcher: worker jobs that claim
    the cells of a queue one after another (module docstring)."""

    def __init__(self, executor, *, pool_dir: Path, parallel: int, env: dict, threads: Optional[int],
                 train_fn: Optional[Callable], fail_fast: bool, max_requeues: int):
        self.executor, self.parallel, self.max_requeues = executor, parallel, max_requeues
        self.env, self.threads, self.train_fn, self.fail_fast = env, threads, train_fn, fail_fast
        self.pool = Path(pool_dir) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self.queues: list[Queue] = []
        self.per_cell_min = getattr(executor, "parameters", {}).get("timeout_min")  # set by make_executor (local)
        self.n_workers = 0
        self.resolved = 0  # cells collected so far (the poll backs off while this stands still)
        self.poll, self.before = POLL_S, None

    def add(self, cells: list[Cell]) -> None:
        if cells:  # the first queue holds every cell to run; a requeued busy cell gets its own
            self.queues.append(Queue(self.pool / f"q{len(self.queues)}", cells))

    def collect(self, outcome: dict[str, str]) -> list[tuple[Cell, str, Optional[float]]]:
        results: list[tuple[Cell, str, Optional[float]]] = []
        for queue in self.queues:
            ended = [n for n, job in queue.workers.items() if n not in queue.ended and job.done()]
            for cid, record in queue.new_outcomes():  # read after job.done(): a worker writes before it exits
                seconds = None if record["outcome"] == BUSY else float(record["seconds"])
                results.append((queue.by_id[cid], record["outcome"], seconds))
            resolved = set(outcome) | {cell.cell_id for cell, result, _ in results if result != BUSY}
            claims = queue.claims()
            for name in ended:
                queue.ended.add(name)
                for cid, owner in claims.items():
                    if cid not in queue.read and cid not in resolved and (owner == name or not queue.running()):
                        results.append((queue.by_id[cid], _died(queue.by_id[cid], queue.workers[name]), None))
                        resolved.add(cid)
                unclaimed = [c for c in queue.cells if c.cell_id not in claims]
                if unclaimed and name not in claims.values():  # it could not even start a cell
                    queue.futile += 1
                    if queue.futile > self.max_requeues:
                        results += [(c, _died(c, queue.workers[name]), None) for c in unclaimed]
                        resolved |= {c.cell_id for c in unclaimed}
        self.resolved += len(results)
        return results

    def launch(self, outcome: dict[str, str]) -> None:
        for queue in self.queues:
            claims = queue.claims()
            unclaimed = [c for c in queue.cells if c.cell_id not in claims and c.cell_id not in outcome]
            while unclaimed and queue.running() < len(unclaimed) and \
                    sum(q.running() for q in self.queues) < self.parallel:
                self._start_worker(queue)

    def _start_worker(self, queue: Queue) -> None:
        name, self.n_workers = f"w{self.n_workers}", self.n_workers + 1
        if self.per_cell_min:
            self.executor.update_parameters(timeout_min=int(self.per_cell_min) * len(queue.cells))
        queue.workers[name] = submit(self.executor, functools.partial(
            run_worker, str(queue.folder), [c.cfg for c in queue.cells], worker=name, driver_pid=os.getpid(),
            env=self.env, threads=self.threads, train_fn=self.train_fn, fail_fast=self.fail_fast))
        if self.per_cell_min:
            self.executor.update_parameters(timeout_min=int(self.per_cell_min))

    def in_flight(self) -> int:
        return sum(len(q.owners) - len(q.read) for q in self.queues)

    def cancel(self) -> None:
        (self.pool / STOP).touch()
        for queue in self.queues:
            for name, job in queue.workers.items():
                if name not in queue.ended:
                    job.cancel()

    def pause(self, waiting: bool) -> float:
        """Fast (POLL_S) while cells finish or workers start, backing off to IDLE_POLL_S."""
        now = (self.resolved, self.in_flight(), self.n_workers)
        self.poll = POLL_S if now != self.before else min(IDLE_POLL_S, 2 * self.poll)
        self.before = now
        return self.poll


def run_pool(cells: list[Cell], *, executor, pool_dir: Path, parallel: int, env: dict, threads: Optional[int],
             train_fn: Optional[Callable], fail_fast: bool, progress, max_requeues: int) -> dict[str, str]:
    """Run every cell that is not done with a pool of workers (driver.drive); returns
    {cell_id: "done" | "failed" | "cancelled"}."""
    units = WorkerPool(executor, pool_dir=pool_dir, parallel=parallel, env=env, threads=threads, train_fn=train_fn,
                       fail_fast=fail_fast, max_requeues=max_requeues)
    return drive(cells, units, fail_fast=fail_fast, progress=progress, max_requeues=max_requeues)
