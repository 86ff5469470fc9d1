"""Finished twins: a cell that another sweep of the same results dir has already finished, with
the same cell id (the hash of the same resolved config) and the same code, is copied into this
sweep instead of being trained again (docs/design.md, Cells another sweep finished).

Every dimension's grid has a GRPO arm, so `arena sweep dimension=filtering` after
`dimension=is_clipping` would otherwise train the same GRPO cells (same config, same seeds, same BC
start) a second time. A cell is copied only when
  - this sweep has no folder for it yet (a started or failed run of this sweep is left to resume
    as before), and
  - the other sweep's folder is done (its summary.json names this cell id: the one proof that a
    run finished), and its own records agree with that summary (`twin_problem`): its sweep's
    manifest lists the cell, its config.yaml hashes to the cell id, and its metrics.jsonl gives
    the summary's first and last eval and its last step (a hand-written summary.json is no
    proof), and
  - the folder lies in this results dir: no symlink on the way to it (a sweep folder linked to
    elsewhere is never followed) and none inside it (nothing a copy would carry out), and
  - its summary's code record (written by the job at its start: arena.runs.provenance) says the
    same code trained it: the same package files (code hash), and the same git SHA with a clean
    checkout on both sides (an unknown dirty state counts as dirty) or, outside git, no SHA on
    either side; the same package versions; no test hooks beyond this driver's.
The copy is written to a hidden sibling and renamed into place (arena.io.atomic.atomic_write_dir),
so a kill leaves either no folder or the whole copy. The lock and heartbeat files and the
source's W&B run (wandb_id.txt, wandb/) are not copied: the copy is logged as a W&B run of its
own in this sweep's group.
`copied_from.json` in the copy names the folder it came from, when, and by which command.
`reuse=false` (a sweep key) trains every cell of the sweep itself."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from arena.config import cell_id as config_cell_id
from arena.env_vars import active_test_hooks
from arena.runs import RunFolder
from arena.io.atomic import atomic_write_dir, atomic_write_json
from arena.runs.layout import CELLS_DIR, COPIED_FROM_FILE, WANDB_DIR, WANDB_ID_FILE, Results
from arena.runs.lock import HEARTBEAT_NAME, LOCK_NAME
from arena.runs.manifest import read_manifest
from arena.runs.provenance import code_state, package_versions
from arena.runs.wandb_log import log_copied_run

# the source's lock, heartbeat and W&B run (its id and offline files): the copy gets its own
# W&B run, in this sweep's group (arena.runs.wandb_log.log_copied_run)
NOT_COPIED = (LOCK_NAME, HEARTBEAT_NAME, WANDB_ID_FILE, WANDB_DIR)


def code_identity(env: dict[str, str] | None = None) -> dict:
    """What a run trained now would record about its code (arena.runs.provenance.code_state,
    read now), the package versions and the active test hooks. `env` (the driver's hand-off to
    its jobs) is not needed: the state is read here as a job reads it."""
    return {**code_state(), "versions": package_versions(), "test_hooks": active_test_hooks()}


def _clean(dirty) -> bool:
    """A dirty flag that says clean: false, or ARENA_GIT_DIRTY's "0". Null (unknown) is not."""
    return dirty is False or dirty == "0"


def same_code(summary: dict, identity: dict) -> bool:
    """The finished run's summary was written by the code `identity` describes (module
    docstring): the same code hash on both sides (a summary without one proves nothing), and
    the same git SHA, clean on both sides; outside git (no SHA on either side) the hash alone."""
    if not summary.get("code_hash") or summary.get("code_hash") != identity.get("code_hash"):
        return False
    sha = summary.get("git_sha") or None
    if sha != (identity.get("git_sha") or None):
        return False
    if sha is not None and not (_clean(summary.get("git_dirty")) and _clean(identity.get("git_dirty"))):
        return False
    return summary.get("versions") == identity["versions"] \
        and (summary.get("test_hooks") or {}) == (identity["test_hooks"] or {})


def _links_on_the_way(results: Results, folder: Path) -> Optional[str]:
    """Why `folder` (sweeps/<sweep>/cells/<id>) is not plainly inside the results dir, or None."""
    for path in (folder.parent.parent, folder.parent, folder):
        if path.is_symlink():
            return f"{path} is a symlink"
    if not folder.resolve().is_relative_to(results.sweeps.resolve()):
        return f"{folder} resolves to {folder.resolve()}, outside {results.sweeps}"
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            if os.path.islink(os.path.join(root, name)):
                return f"{os.path.join(root, name)} is a symlink"
    return None


def _metrics_problem(run: RunFolder, summary: dict) -> Optional[str]:
    """Why the run's metrics.jsonl does not give its summary's evals and steps, or None (the
    summary is built from those rows: arena.runs.summary.build_summary)."""
    try:
        rows = run.read_metrics()
    except (OSError, ValueError) as exc:
        return f"its metrics are unreadable ({exc})"
    points = [r["eval/success_rate"] for r in rows if isinstance(r.get("eval/success_rate"), (int, float))]
    expected = {"initial_eval_success": points[0] if points else None,
                "final_eval_success": points[-1] if points else None,
                "steps": max((r["step"] for r in rows), default=0)}
    wrong = [f"{k}={summary.get(k)!r} (metrics: {v!r})" for k, v in expected.items() if summary.get(k) != v]
    return f"its summary disagrees with {run.metrics_file.name}: {', '.join(wrong)}" if wrong else None


def twin_problem(results: Results, folder: Path, cell_id: str, summary: dict) -> Optional[str]:
    """Why the done folder `folder` of another sweep is no twin to copy, or None (module docstring)."""
    from omegaconf import OmegaConf

    linked = _links_on_the_way(results, folder)
    if linked:
        return linked
    sweep = folder.parent.parent.name
    try:
        listed = {c.get("cell_id") for c in read_manifest(results.root, sweep)["cells"] if isinstance(c, dict)}
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        return f"sweep {sweep}'s manifest is unreadable ({exc})"
    if cell_id not in listed:
        return f"sweep {sweep}'s manifest does not list cell {cell_id}"
    run = RunFolder(folder, expect_cell_id=cell_id)
    try:
        hashed = config_cell_id(OmegaConf.load(run.config_file))
    except Exception as exc:  # missing, unparsable or not a run config
        return f"its {run.config_file.name} cannot be hashed ({type(exc).__name__})"
    if hashed != cell_id:
        return f"its {run.config_file.name} hashes to {hashed}, not {cell_id}"
    return _metrics_problem(run, summary)


def finished_twin(results: Results, sweep: str, cell_id: str, identity: dict,
                  log: Callable = lambda *_: None) -> Optional[Path]:
    """The first (sorted by sweep name) other sweep's folder of `cell_id` that is done, whose
    records agree (`twin_problem`) and that was trained by the same code, or None."""
    for sweep_dir in sorted(results.sweeps.iterdir()) if results.sweeps.is_dir() else []:
        folder = sweep_dir / CELLS_DIR / cell_id
        if sweep_dir.name == sweep or not folder.is_dir():
            continue
        run = RunFolder(folder, expect_cell_id=cell_id)
        summary = run.summary() if run.done else None
        if summary is None or not same_code(summary, identity):
            continue
        problem = twin_problem(results, folder, cell_id, summary)
        if problem is None:
            return folder
        log(f"[sweep] not copying {folder}: {problem}")
    return None


def twins_to_copy(cells: Iterable, results: Results, sweep: str, identity: dict,
                  log: Callable = lambda *_: None) -> list[tuple]:
    """(cell, its finished twin's folder) for each cell of `cells` that has no folder in this
    sweep yet and a twin to copy (module docstring): what a sweep copies, and its dry run lists."""
    found = []
    for cell in cells:
        if Path(cell.out).exists() or Path(cell.out).is_symlink():
            continue
        twin = finished_twin(results, sweep, cell.cell_id, identity, log)
        if twin is not None:
            found.append((cell, twin))
    return found


def copy_finished_twins(cells: Iterable, results: Results, sweep: str, identity: dict, *,
                        command: str, log: Callable = print) -> list[str]:
    """Copy in the finished twin of each cell of `cells` that has no folder yet; returns the
    copied cell ids (module docstring)."""
    copied = []
    for cell, twin in twins_to_copy(cells, results, sweep, identity, log):

        def fill(tmp: Path, twin: Path = twin) -> None:
            shutil.copytree(twin, tmp, symlinks=True, dirs_exist_ok=True,  # twin_problem: it holds none
                            ignore=lambda folder, names: [n for n in names if n in NOT_COPIED and Path(folder) == twin])
            atomic_write_json(tmp / COPIED_FROM_FILE, {
                "from": str(twin.resolve()), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": command})

        atomic_write_dir(Path(cell.out), fill)
        copied.append(cell.cell_id)
        try:  # W&B is a mirror: a failure to log the copy there never stops the sweep
            log_copied_run(cell.cfg, cell.cell_id, Path(cell.out), twin)
        except Exception as exc:  # noqa: BLE001 (wandb raises its own kinds)
            log(f"[sweep] copied {cell.cell_id}, but could not log it to W&B: {type(exc).__name__}: {exc}")
    if copied:
        log(f"[sweep] {len(copied)} cell(s) copied from other sweeps under {results.sweeps} that finished them with "
            f"the same config and code (each has {COPIED_FROM_FILE}; reuse=false trains them again)")
    return copied
