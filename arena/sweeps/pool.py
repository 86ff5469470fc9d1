"""The local launcher's driver loop: a pool of worker jobs (worker.py) per queue of cells.

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

from .launchers import submit
from .ledger import BUSY, DONE, FAILED, cell_state, settle_waiting
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
    (cell.out / "error.txt").write_text(f"the job died before the cell finished ({why})\n")
    return FAILED


def run_pool(cells: list[Cell], *, executor, pool_dir: Path, parallel: int, env: dict, threads: Optional[int],
             train_fn: Optional[Callable], fail_fast: bool, progress, max_requeues: int) -> dict[str, str]:
    """Run every cell that is not done; returns {cell_id: "done" | "failed" | "cancelled"}."""
    pool = Path(pool_dir) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    cells = list({c.cell_id: c for c in cells}.values())  # each cell once
    outcome = {c.cell_id: DONE for c in cells if cell_state(c.out) == DONE}
    todo = [c for c in cells if c.cell_id not in outcome]
    queues = [Queue(pool / "q0", todo)] if todo else []
    waiting: dict[str, Cell] = {}  # held by another live process
    requeues: dict[str, int] = {}
    per_cell_min = getattr(executor, "parameters", {}).get("timeout_min")  # set by make_executor (local)
    n_workers = 0
    count = lambda state: sum(v == state for v in outcome.values())  # noqa: E731

    def start_worker(queue: Queue) -> None:
        nonlocal n_workers
        name, n_workers = f"w{n_workers}", n_workers + 1
        if per_cell_min:
            executor.update_parameters(timeout_min=int(per_cell_min) * len(queue.cells))
        queue.workers[name] = submit(executor, functools.partial(
            run_worker, str(queue.folder), [c.cfg for c in queue.cells], worker=name, driver_pid=os.getpid(),
            env=env, threads=threads, train_fn=train_fn, fail_fast=fail_fast))
        if per_cell_min:
            executor.update_parameters(timeout_min=int(per_cell_min))

    poll, before = POLL_S, None
    while len(outcome) < len(cells):
        for queue in queues:
            ended = [n for n, job in queue.workers.items() if n not in queue.ended and job.done()]
            for cid, record in queue.new_outcomes():  # read after job.done(): a worker writes before it exits
                if record["outcome"] == BUSY:
                    waiting[cid] = queue.by_id[cid]
                else:
                    outcome[cid] = record["outcome"]
                    progress.durations.append(float(record["seconds"]))
            claims = queue.claims()
            for name in ended:
                queue.ended.add(name)
                for cid, owner in claims.items():
                    if cid not in queue.read and cid not in outcome and (owner == name or not queue.running()):
                        outcome[cid] = _died(queue.by_id[cid], queue.workers[name])
                unclaimed = [c for c in queue.cells if c.cell_id not in claims]
                if unclaimed and name not in claims.values():  # it could not even start a cell
                    queue.futile += 1
                    if queue.futile > max_requeues:
                        outcome.update({c.cell_id: _died(c, queue.workers[name]) for c in unclaimed})
            unclaimed = [c for c in queue.cells if c.cell_id not in claims and c.cell_id not in outcome]
            while unclaimed and queue.running() < len(unclaimed) and \
                    sum(q.running() for q in queues) < parallel and not (fail_fast and count(FAILED)):
                start_worker(queue)
        for cell in settle_waiting(waiting, outcome, requeues, max_requeues):  # holder died: run it ourselves
            queues.append(Queue(pool / f"q{len(queues)}", [cell]))
        if fail_fast and count(FAILED):
            (pool / STOP).touch()
            for queue in queues:
                for name, job in queue.workers.items():
                    if name not in queue.ended:
                        job.cancel()
            for cell in cells:
                outcome.setdefault(cell.cell_id, "cancelled")
            break
        running = sum(len(q.owners) - len(q.read) for q in queues) + len(waiting)
        progress.report(count(DONE), running, count(FAILED))
        now = (len(outcome), running, n_workers)
        poll = POLL_S if now != before else min(IDLE_POLL_S, 2 * poll)  # fast while things happen
        before = now
        if len(outcome) < len(cells):
            time.sleep(poll)
    progress.report(count(DONE), 0, count(FAILED), force=True)
    return outcome
