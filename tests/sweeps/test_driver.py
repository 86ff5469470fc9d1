"""The one driver loop (arena/sweeps/driver.py) over cell states, with scripted units of work:
what it hands the units, what it records, and fail_fast."""
from omegaconf import OmegaConf

from arena.sweeps.driver import Progress, drive
from arena.sweeps.ledger import BUSY, DONE, FAILED
from arena.sweeps.plan import Cell

from .fake_train import write_valid_summary


def cell(tmp_path, cid):
    return Cell(arm="a", env="sokoban", seed=0, role="report", method="grpo", overrides={},
                cfg=OmegaConf.create({"out": str(tmp_path / cid)}), cell_id=cid)


class Scripted:
    """Units whose k-th collect returns script[k] (cell ids with their result)."""

    def __init__(self, cells, script):
        self.by_id, self.script = {c.cell_id: c for c in cells}, list(script)
        self.added, self.cancelled, self.launches = [], False, 0

    def add(self, cells):
        self.added.append([c.cell_id for c in cells])

    def collect(self, outcome):
        step = self.script.pop(0) if self.script else []
        return [(self.by_id[cid], result, 1.0) for cid, result in step]

    def launch(self, outcome):
        self.launches += 1

    def in_flight(self):
        return 0

    def cancel(self):
        self.cancelled = True

    def pause(self, waiting):
        return 0.0


def test_done_cells_are_skipped_and_a_vanished_holder_gets_the_cell_again(tmp_path):
    a, b, c = (cell(tmp_path, x) for x in "abc")
    (tmp_path / "a").mkdir()
    write_valid_summary(tmp_path / "a")  # a is done on disk: never handed to the units
    # pass 1: b busy (its folder holds no lock, no heartbeat, no error: the holder vanished), c failed
    # pass 2: nothing; b was requeued in pass 1 -> pass 3: b done
    units = Scripted([a, b, c], [[("b", BUSY), ("c", FAILED)], [], [("b", DONE)]])
    lines = []
    outcome = drive([a, b, c, b], units, fail_fast=False, progress=Progress(3, 1, 0.0, lines.append), max_requeues=3)
    assert outcome == {"a": DONE, "b": DONE, "c": FAILED}
    assert units.added == [["b", "c"], ["b"]]  # b listed twice in the input, run once; requeued once
    assert lines[-1].startswith("[sweep] 2/3 done, 0 running, 1 failed")


def test_fail_fast_cancels_the_units_and_marks_the_rest_cancelled(tmp_path):
    cells = [cell(tmp_path, x) for x in "xyz"]
    units = Scripted(cells, [[("x", FAILED)]])
    outcome = drive(cells, units, fail_fast=True, progress=Progress(3, 1, 60.0, lambda line: None), max_requeues=3)
    assert outcome == {"x": FAILED, "y": "cancelled", "z": "cancelled"}
    assert units.cancelled and units.launches == 1  # nothing launched after the failure
