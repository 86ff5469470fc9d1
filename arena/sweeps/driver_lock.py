"""One grid per sweep name at a time (docs/design.md, Manifest).

A sweep's driver holds a shared flock on `<sweep_dir>/.driver.lock` for as long as it runs. Before
it rewrites manifest.json it takes `<sweep_dir>/.manifest.lock` exclusively; if another driver is
live (the shared lock is held) and the manifest on disk lists other report cells (another grid,
other envs or seeds under the same name), rewriting it would hide that driver's cells from the
report and from `arena status` once they finish: the command exits 2 instead. Identical commands
(the same report cells) may run at once: each cell is still run once (the cell lock,
arena/sweeps/ledger.py). flock is per host: drivers of one sweep on two hosts are not seen.
"""
from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .ledger import file_lock_is_held


class SweepBusy(ValueError):
    """Another live driver runs other cells under this sweep name (exit 2: bad input)."""


def report_keys(rows) -> set[tuple[str, str, int]]:
    return {(str(r["arm"]), str(r["env"]), int(r["seed"])) for r in rows if r.get("role") == "report"}


def _manifest_keys(manifest_file: Path) -> set[tuple[str, str, int]] | None:
    try:
        return report_keys(json.loads(manifest_file.read_text())["cells"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or unreadable: nothing to protect


@contextmanager
def sweep_driver_lock(plan) -> Iterator[None]:
    """Write `plan`'s manifest and hold the driver lock until the block ends; raises SweepBusy
    (nothing written) when a live driver of other report cells owns the sweep's name."""
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    driver = open(plan.sweep_dir / ".driver.lock", "a+")
    try:
        with open(plan.sweep_dir / ".manifest.lock", "a+") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)  # released when `gate` closes
            on_disk = _manifest_keys(plan.manifest_file)
            ours = report_keys(c.manifest_row() for c in plan.cells)
            if on_disk is not None and on_disk != ours and file_lock_is_held(plan.sweep_dir / ".driver.lock"):
                extra = sorted("/".join(map(str, k)) for k in on_disk - ours)
                raise SweepBusy(
                    f"sweep {plan.name!r} is running now with other cells ({len(extra)} not in this command: "
                    f"{', '.join(extra[:6])}{' ...' if len(extra) > 6 else ''}); valid: wait for it to end, "
                    f"or another name=NAME for this sweep")
            fcntl.flock(driver, fcntl.LOCK_SH)
            plan.write_manifest()
        yield
    finally:
        driver.close()  # releases the shared lock
