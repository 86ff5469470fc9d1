"""The sweep's ETA (driver.Progress) moves with the running cells' steps: not "-" until the first
cell finishes, and not frozen between two cells that finish."""
import json
from pathlib import Path
from types import SimpleNamespace

from arena.sweeps.driver import Progress, cell_progress


def _cell(folder: Path, steps: int):
    folder.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(out=folder, cfg=SimpleNamespace(steps=steps), cell_id=folder.name)


def _log_steps(cell, steps, seconds=1.0):
    with open(cell.out / "metrics.jsonl", "a") as fh:
        for step in steps:
            fh.write(json.dumps({"step": step, "perf/step_seconds": seconds}) + "\n")


def _eta(progress, pending) -> str:
    lines = []
    progress.log = lines.append
    progress.report(0, 1, 0, force=True, pending=pending)
    return lines[-1].rpartition("ETA ")[2]


def test_eta_from_the_running_cells_steps(tmp_path):
    running, queued = _cell(tmp_path / "a", 10), _cell(tmp_path / "b", 10)
    progress = Progress(2, 1, 30.0, print)
    assert _eta(progress, [running, queued]) == "-"  # nothing logged yet: nothing to time
    # a: steps 0-2 logged at 1 s a step -> 8 steps left = 8 s; b not started, priced at a's whole
    # cell, 10 x 1 = 10 s; one job: ETA = max(8, (8 + 10) / 1) = 18 s
    _log_steps(running, [0, 1, 2])
    assert cell_progress(running) == (8.0, 10.0)
    assert _eta(progress, [running, queued]) == "18s"
    _log_steps(running, [3])  # one more step: the ETA moves before any cell finished
    assert _eta(progress, [running, queued]) == "17s"
    # a torn last row (being written) is skipped
    with open(running.out / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 4, "perf/st')
    assert _eta(progress, [running, queued]) == "17s"


def test_eta_after_a_cell_finished_still_moves(tmp_path):
    # one cell finished in 20 s; b runs (5 of 10 steps at 2 s: 10 s left), c waits (20 s, the mean
    # finished time); two jobs: ETA = max(10, (10 + 20) / 2) = 15 s; two steps later 6 s left: 13 s
    b, c = _cell(tmp_path / "b", 10), _cell(tmp_path / "c", 10)
    progress = Progress(3, 2, 30.0, print)
    progress.durations.append(20.0)
    _log_steps(b, [0, 1, 2, 3, 4, 5], seconds=2.0)
    assert _eta(progress, [b, c]) == "15s"
    _log_steps(b, [6, 7], seconds=2.0)
    assert _eta(progress, [b, c]) == "13s"
