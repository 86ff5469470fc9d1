"""Finished twins: a cell that another sweep of the same results dir has already finished, with
the same cell id (the hash of the same resolved config) and the same code, is copied into this
sweep instead of being trained again (docs/design.md, Cells another sweep finished).

Every dimension's grid has a GRPO arm, so `arena sweep dimension=filtering` after
`dimension=is_clipping` would otherwise train the same GRPO cells (same config, same seeds, same BC
start) a second time. A cell is copied only when
  - this sweep has no folder for it yet (a started or failed run of this sweep is left to resume
    as before), and
  - the other sweep's folder is done (its summary.json names this cell id: the one proof that a
    run finished), and
  - its summary's provenance says the same code trained it: the same git SHA and a clean
    checkout on both sides, the same package versions, no test hooks beyond this driver's.
The copy is written to a hidden sibling and renamed into place (arena.io.atomic.atomic_write_dir),
so a kill leaves either no folder or the whole copy. The lock and heartbeat files are not copied.
`copied_from.json` in the copy names the folder it came from, when, and by which command.
`reuse=false` (a sweep key) trains every cell of the sweep itself."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from arena.runs import RunFolder
from arena.io.atomic import atomic_write_dir, atomic_write_json
from arena.runs.layout import CELLS_DIR, COPIED_FROM_FILE, Results
from arena.runs.lock import HEARTBEAT_NAME, LOCK_NAME

NOT_COPIED = (LOCK_NAME, HEARTBEAT_NAME)


def code_identity(env: dict[str, str]) -> dict:
    """What a run trained now would record about its code (arena.runs.provenance): the driver's
    git state, already read into `env` (runner.provenance_env), the package versions and the
    active test hooks."""
    from arena.env_vars import active_test_hooks
    from arena.runs.provenance import package_versions

    return {"git_sha": env.get("ARENA_GIT_SHA") or None, "git_dirty": env.get("ARENA_GIT_DIRTY") == "1",
            "versions": package_versions(), "test_hooks": active_test_hooks()}


def same_code(summary: dict, identity: dict) -> bool:
    """The finished run's summary was written by the code `identity` describes, on a clean checkout
    (a dirty one may hold any change: never copied). No git (an installed package): the versions decide."""
    if identity["git_dirty"] or summary.get("git_dirty") not in (False, None, "0"):  # "0": ARENA_GIT_DIRTY's spelling
        return False
    return (summary.get("git_sha") or None) == identity["git_sha"] and summary.get("versions") == identity["versions"] \
        and (summary.get("test_hooks") or {}) == (identity["test_hooks"] or {})


def finished_twin(results: Results, sweep: str, cell_id: str, identity: dict) -> Optional[Path]:
    """The first (sorted by sweep name) other sweep's folder of `cell_id` that is done and was
    trained by the same code, or None."""
    for folder in sorted(results.sweeps.glob(f"*/{CELLS_DIR}/{cell_id}")):
        if folder.parent.parent.name == sweep or folder.is_symlink() or not folder.is_dir():
            continue
        run = RunFolder(folder, expect_cell_id=cell_id)
        summary = run.summary() if run.done else None
        if summary is not None and same_code(summary, identity):
            return folder
    return None


def twins_to_copy(cells: Iterable, results: Results, sweep: str, identity: dict) -> list[tuple]:
    """(cell, its finished twin's folder) for each cell of `cells` that has no folder in this
    sweep yet and a twin to copy (module docstring): what a sweep copies, and its dry run lists."""
    found = []
    for cell in cells:
        if Path(cell.out).exists() or Path(cell.out).is_symlink():
            continue
        twin = finished_twin(results, sweep, cell.cell_id, identity)
        if twin is not None:
            found.append((cell, twin))
    return found


def copy_finished_twins(cells: Iterable, results: Results, sweep: str, identity: dict, *,
                        command: str, log: Callable = print) -> list[str]:
    """Copy in the finished twin of each cell of `cells` that has no folder yet; returns the
    copied cell ids (module docstring)."""
    copied = []
    for cell, twin in twins_to_copy(cells, results, sweep, identity):

        def fill(tmp: Path, twin: Path = twin) -> None:
            shutil.copytree(twin, tmp, symlinks=True, dirs_exist_ok=True,
                            ignore=lambda _dir, names: [n for n in names if n in NOT_COPIED])
            atomic_write_json(tmp / COPIED_FROM_FILE, {
                "from": str(twin.resolve()), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": command})

        atomic_write_dir(Path(cell.out), fill)
        copied.append(cell.cell_id)
    if copied:
        log(f"[sweep] {len(copied)} cell(s) copied from other sweeps under {results.sweeps} that finished them with "
            f"the same config and code (each has {COPIED_FROM_FILE}; reuse=false trains them again)")
    return copied
