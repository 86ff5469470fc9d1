"""The slow stage on two xdist workers (`pytest -m slow -n 2 --dist loadgroup`, .ci/run).

- A learning bar's seed (one `arena train` process, one torch thread) may run beside anything:
  those items are spread over both workers, longest first, so the short ones fill the ends.
- Every other test is one work unit, `serial`, run on one worker in collection order, as
  without xdist: one SLURM cluster, fixed Ray ports, kills timed against a known load. It goes
  first: it is the longest unit.

xdist's own `loadgroup` reads `xdist_group` marks by rewriting a private node attribute that
pytest 9 no longer reads, so the units are made here, from the node id, by the scheduler hook
(tests/conftest.py). The controller has node ids only, not markers: the table below is by module.
Without -n only the order applies.
"""
from __future__ import annotations

from typing import Optional

# module -> minutes of one item (one seed, one thread) beside another process, measured
# (docs/testbed.md, "The slow stage on two workers")
SIDE_BY_SIDE_MINUTES = {
    "tests/embedded/test_household_learning.py": 27,  # opt-in: its seeds run only when the file is named
    "tests/embedded/test_shop_learning.py": 15,
    "tests/embedded/test_learning_bar.py": 4.5,  # regime D, 50 steps (223-285 s beside one other run)
    "tests/verl/test_gpu_extras_resolve.py": 1,  # pip's resolver on the network: ~1 min an extra, ~20 s of CPU
}
SERIAL = "serial"


def side_by_side_minutes(nodeid: str) -> Optional[float]:
    """Minutes of an item that may run beside others; None for the serial unit's items."""
    return SIDE_BY_SIDE_MINUTES.get(nodeid.split("::", 1)[0])


def work_unit(nodeid: str) -> str:
    """The scheduler's unit of an item: itself if it may run beside others, else `serial`."""
    return nodeid if side_by_side_minutes(nodeid) is not None else SERIAL


def order(items: list) -> None:
    """In place: every other test first, in its order (stable sort); then side-by-side items,
    longest first."""
    def key(item):
        minutes = side_by_side_minutes(item.nodeid)
        return (minutes is not None, -(minutes or 0.0))
    items.sort(key=key)


def make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SlowStageScheduling(LoadScopeScheduling):
        """LoadScope with `work_unit` as the scope (xdist's LoadGroupScheduling is the same
        override, keyed on the node id suffix pytest 9 no longer carries)."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SlowStageScheduling(config, log)
