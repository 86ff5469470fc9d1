"""The ledger: a cell's state is read from its run folder alone (docs/design.md, Run folder).

    done     summary.json parses and carries every field (the only proof of completion;
             a corrupt one counts as missing: the job sets it aside and reruns the cell)
    busy     a live process holds the cell's lock (arena/runs/lock.py)
    failed   error.txt exists and no live holder
    missing  anything else (never started, or killed: resumes from its checkpoint)
"""
from __future__ import annotations

from pathlib import Path

from arena.runs.folder import RunFolder
from arena.runs.layout import ERROR_FILE
from arena.runs.lock import flock_is_held, heartbeat_is_live

DONE, BUSY, FAILED, MISSING = "done", "busy", "failed", "missing"


def cell_state(cell_dir: str | Path) -> str:
    cell_dir = Path(cell_dir)
    if RunFolder(cell_dir, expect_cell_id=cell_dir.name).done:  # a sweep cell's folder is named by its id
        return DONE
    if flock_is_held(cell_dir) or heartbeat_is_live(cell_dir):
        return BUSY
    if (cell_dir / ERROR_FILE).exists():
        return FAILED
    return MISSING


def settle_waiting(waiting: dict, outcome: dict, requeues: dict, max_requeues: int) -> list:
    """The cells a driver waits on because another process held them (busy): record DONE or
    FAILED from disk, and return those whose holder died without a trace (MISSING), to run
    again; a cell requeued more than `max_requeues` times counts as FAILED instead.
    `waiting` ({cell_id: cell with .out}), `outcome` and `requeues` are updated in place."""
    rerun = []
    for cid, cell in list(waiting.items()):
        state = cell_state(cell.out)
        if state in (DONE, FAILED):
            outcome[cid] = state
            del waiting[cid]
        elif state == MISSING:
            del waiting[cid]
            requeues[cid] = requeues.get(cid, 0) + 1
            if requeues[cid] > max_requeues:
                outcome[cid] = FAILED
            else:
                rerun.append(cell)
    return rerun
