"""The local launcher's job: a worker that claims the cells of a queue one after another and
runs each with `run_cell`, so python, the imports and torch start once per worker, not once per
cell. The driver side is pool.py.

A queue is a folder the driver creates, shared by the workers it submits for it:

    <queue>/claims/<cell_id>     created with O_EXCL by the one worker that takes the cell;
                                 it holds that worker's name
    <queue>/outcomes/<cell_id>   {"outcome": "done"|"failed"|"busy", "seconds": s}, written
                                 (atomically) once run_cell returned
    <pool>/STOP                  fail_fast: no worker claims another cell

A claim only divides one driver's queue among its workers. Whether the cell may run is still
decided by run_cell's lock (flock + heartbeat, held by this process while the cell runs), so
another driver's workers, or a killed driver's, never run the cell twice. A worker stops
claiming when its driver is gone (the cell in hand finishes), as a killed driver's jobs did
before; the rerun's own workers take the rest.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Optional

from arena.runs.lock import pid_alive

from .job import run_cell
from .ledger import FAILED

CLAIMS, OUTCOMES, STOP = "claims", "outcomes", "STOP"


def claim(queue: Path, cell_id: str, worker: str) -> bool:
    """True when `worker` takes the cell: it created the claim, or it is its own unfinished
    claim from before a requeue (submitit restarts a timed-out or preempted job)."""
    path = queue / CLAIMS / cell_id
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            mine = path.read_text() == worker
        except OSError:
            return False
        return mine and not (queue / OUTCOMES / cell_id).exists()
    with os.fdopen(fd, "w") as fh:
        fh.write(worker)
    return True


def write_outcome(queue: Path, cell_id: str, outcome: str, seconds: float) -> None:
    # a signal to this driver, not a result (summary.json is): written whole (temp dotfile, which
    # Queue.new_outcomes skips, then rename) but not fsynced, which would cost every cell
    tmp = queue / OUTCOMES / f".{cell_id}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"outcome": outcome, "seconds": seconds}))
    os.replace(tmp, queue / OUTCOMES / cell_id)


def run_worker(queue_dir: str, cfgs: list, *, worker: str, driver_pid: int, env: dict[str, str],
               threads: Optional[int] = None, train_fn: Optional[Callable] = None,
               fail_fast: bool = False) -> dict[str, str]:
    """Run every cell of the queue no other worker has claimed; {cell_id: outcome} of its own."""
    queue = Path(queue_dir)
    stop_file = queue.parent / STOP
    outcomes: dict[str, str] = {}
    for cfg in cfgs:
        if stop_file.exists() or not pid_alive(driver_pid):
            break
        cell_id = Path(cfg.out).name
        if not claim(queue, cell_id, worker):
            continue
        started = time.time()
        outcomes[cell_id] = run_cell(cfg, env=env, threads=threads, train_fn=train_fn)
        write_outcome(queue, cell_id, outcomes[cell_id], time.time() - started)
        if fail_fast and outcomes[cell_id] == FAILED:
            stop_file.touch()
    return outcomes
