"""The one sweep driver loop over cell states (docs/design.md, Run folder; the ledger is the
run folders themselves, arena/sweeps/ledger.py).

The loop knows cell states only: done cells are skipped, a finished unit of work reports each
of its cells' outcome ("done" | "failed", or "busy": another live process holds the cell, so
the loop waits for that cell's summary.json or error.txt and reruns it when its holder
vanished), fail_fast cancels everything after the first failure, and progress is printed.
How a unit of work is submitted is the `Units` strategy's:

- `runner.OneJobPerCell`: one submitit job per cell (debug and SLURM launchers);
- `pool.WorkerPool`: worker jobs that each run cell after cell from a queue (local launcher).
"""
from __future__ import annotations

import json
import time
from typing import Callable, Optional, Protocol

from arena.runs.layout import METRICS_FILE

from .ledger import BUSY, DONE, FAILED, cell_state, settle_waiting
from .plan import Cell

CANCELLED = "cancelled"


class Units(Protocol):
    """How a launcher's units of work run the cells the loop gives them."""

    def add(self, cells: list[Cell]) -> None:
        """Cells to run (first all that are not done; later one at a time, a busy cell whose
        holder vanished)."""

    def collect(self, outcome: dict[str, str]) -> list[tuple[Cell, str, float | None]]:
        """Cells resolved since the last call: (cell, "done" | "failed" | "busy", seconds it
        took or None). `outcome` (read only) holds the cells resolved before."""

    def launch(self, outcome: dict[str, str]) -> None:
        """Submit units of work for cells not yet running, within the launcher's parallelism."""

    def in_flight(self) -> int:
        """Cells being run now."""

    def cancel(self) -> None:
        """Stop every running unit (fail_fast)."""

    def pause(self, waiting: bool) -> float:
        """Seconds to sleep before the next pass (`waiting`: the loop waits on busy cells)."""


def cell_progress(cell: Cell) -> Optional[tuple[float, float]]:
    """(seconds left, seconds the whole cell takes) of a started cell, from its metrics.jsonl:
        step_s = mean perf/step_seconds of its rows with step > 0 (rollout, update, its evals)
        left   = (steps - last logged step) * step_s,   whole = steps * step_s
    None before its first training step is logged (or without a readable file). A row being
    written (a torn last line) is skipped."""
    try:
        lines = (cell.out / METRICS_FILE).read_text().splitlines()
    except OSError:
        return None
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
            rows.append((int(row["step"]), row.get("perf/step_seconds")))
        except (ValueError, TypeError, KeyError):
            continue
    timed = [float(sec) for step, sec in rows if step > 0 and isinstance(sec, (int, float))]
    if not timed:
        return None
    step_s, steps = sum(timed) / len(timed), int(cell.cfg.steps)
    return max(0, steps - max(step for step, _ in rows)) * step_s, steps * step_s


class Progress:
    def __init__(self, total: int, parallel: int, every_s: float, log: Callable):
        self.total, self.parallel, self.every_s, self.log = total, parallel, every_s, log
        self.started = time.time()
        self.last = 0.0
        self.durations: list[float] = []

    def eta(self, pending: list[Cell]) -> Optional[float]:
        """Seconds left for the cells not resolved, or None when nothing is timed yet:
            per_cell = mean time of the finished cells, else the mean whole-cell time of the started ones
            ETA      = max(longest left of a started cell,
                           (sum of the started cells' left + cells not started x per_cell) / parallel)
        It moves with the running cells' steps (cell_progress), before any cell finished and between
        two that finish."""
        started = [p for p in map(cell_progress, pending) if p is not None]
        waiting = len(pending) - len(started)
        per_cell = (sum(self.durations) / len(self.durations) if self.durations else
                    sum(whole for _, whole in started) / len(started) if started else None)
        if per_cell is None:
            return None if pending else 0.0
        left = [remaining for remaining, _ in started]
        return max(max(left, default=0.0), (sum(left) + waiting * per_cell) / max(1, self.parallel))

    def report(self, done: int, running: int, failed: int, *, force: bool = False,
               pending: Optional[list[Cell]] = None) -> None:
        now = time.time()
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        remaining = self.total - done - failed
        eta = self.eta(pending or []) if remaining else 0.0
        self.log(f"[sweep] {done}/{self.total} done, {running} running, {failed} failed, "
                 f"elapsed {now - self.started:.0f}s, ETA {'-' if eta is None else f'{eta:.0f}s'}")


def drive(cells: list[Cell], units: Units, *, fail_fast: bool, progress: Progress,
          max_requeues: int) -> dict[str, str]:
    """Run every cell that is not done; returns {cell_id: "done" | "failed" | "cancelled"}."""
    cells = list({c.cell_id: c for c in cells}.values())  # each cell once
    outcome = {c.cell_id: DONE for c in cells if cell_state(c.out) == DONE}
    units.add([c for c in cells if c.cell_id not in outcome])
    waiting: dict[str, Cell] = {}  # held by another live process
    requeues: dict[str, int] = {}
    count = lambda state: sum(v == state for v in outcome.values())  # noqa: E731
    while len(outcome) < len(cells):
        units.launch(outcome)  # never after a failure under fail_fast: the pass that saw it stopped
        for cell, result, seconds in units.collect(outcome):
            if result == BUSY:
                waiting[cell.cell_id] = cell
            else:
                outcome[cell.cell_id] = result
                if seconds is not None:
                    progress.durations.append(seconds)
        for cell in settle_waiting(waiting, outcome, requeues, max_requeues):  # holder died: run it ourselves
            units.add([cell])
        if fail_fast and count(FAILED):
            units.cancel()
            for cell in cells:
                outcome.setdefault(cell.cell_id, CANCELLED)
            break
        progress.report(count(DONE), units.in_flight() + len(waiting), count(FAILED),
                        pending=[c for c in cells if c.cell_id not in outcome])
        if len(outcome) < len(cells):
            time.sleep(units.pause(bool(waiting)))
    progress.report(count(DONE), 0, count(FAILED), force=True)
    return outcome
