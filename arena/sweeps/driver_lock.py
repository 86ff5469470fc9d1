"""One grid per sweep name at a time (docs/design.md, Manifest).

A sweep's driver holds a shared flock on `<sweep_dir>/.driver.lock` for as long as it runs. Before
it rewrites manifest.json it takes `<sweep_dir>/.manifest.lock` exclusively; if another driver is
live (the shared lock is held) and the manifest on disk lists other report cells (another grid,
other envs or seeds, or another config of the same cells: other cell ids, under the same name), rewriting it would hide that driver's cells from the
report and from `arena status` once they finish: the command exits 2 instead. Identical commands
(the same report cells) may run at once: each cell is still run once (the cell lock,
arena/runs/lock.py). flock is per host: drivers of one sweep on two hosts are not seen.
"""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from typing import Iterator

from arena.runs.lock import file_lock_is_held
from arena.runs.manifest import report_cells_on_disk, report_key


class SweepBusy(ValueError):
    """Another live driver runs other cells under this sweep name (exit 2: bad input)."""


@contextmanager
def sweep_driver_lock(plan) -> Iterator[None]:
    """Write `plan`'s manifest and hold the driver lock until the block ends; raises SweepBusy
    (nothing written) when a live driver of other report cells owns the sweep's name."""
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    driver = open(plan.sweep_dir / ".driver.lock", "a+")
    try:
        with open(plan.sweep_dir / ".manifest.lock", "a+") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)  # released when `gate` closes
            rows = report_cells_on_disk(plan.results.root, plan.name)
            # a report cell is (arm, env, seed) and its cell id: the same arm/env/seed under another
            # config (another id) would supersede the live driver's cell in the manifest
            on_disk = None if rows is None else {(report_key(r), str(r["cell_id"])) for r in rows}
            ours = {(report_key(c.manifest_row()), c.cell_id) for c in plan.cells if c.role == "report"}
            if on_disk is not None and on_disk != ours and file_lock_is_held(plan.sweep_dir / ".driver.lock"):
                extra = sorted(f"{'/'.join(map(str, k))} (cell {cid})" for k, cid in on_disk - ours)
                raise SweepBusy(
                    f"sweep {plan.name!r} is running now with other cells ({len(extra)} not in this command: "
                    f"{', '.join(extra[:6])}{' ...' if len(extra) > 6 else ''}); valid: wait for it to end, "
                    f"or another name=NAME for this sweep")
            fcntl.flock(driver, fcntl.LOCK_SH)
            plan.write_manifest()
        yield
    finally:
        driver.close()  # releases the shared lock
