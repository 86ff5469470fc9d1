"""What a launched job runs: take the cell's lock, train (resuming from the run's checkpoint),
release. Returns the cell's outcome as a string: "done", "failed" or "busy" (another live
process holds the cell: this job ran nothing). Never raises for a training failure: the
traceback goes to `<cell>/error.txt`."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

from omegaconf import OmegaConf

from arena import malloc_tuning
from arena.backends import backend_of
from arena.cli_errors import out_of_space, out_of_space_message
from arena.runs.folder import RunFolder
from arena.runs.layout import SUMMARY_FILE
from arena.runs.lock import CellLock
from arena.runs.provenance import pin_code_state
from arena.runs.run_log import recording

from .ledger import BUSY, DONE, FAILED


def default_train_fn(cfg) -> int:
    """Train one cell with its backend (arena.backends.BACKENDS). A backend whose cells run in a
    child process (verl) gets `python -m <its module> <cell>/<backend>_cell.yaml`: a local worker
    runs cell after cell in one process, and what such a run starts (verl: its Ray head and
    vLLM servers) must not outlive, or leak into, the next cell."""
    backend = backend_of(cfg)
    if not backend.cells_in_child_process:
        return backend.train_fn()(cfg)
    cell_dir = Path(cfg.out)
    cell_dir.mkdir(parents=True, exist_ok=True)
    config_file = cell_dir / f"{backend.name}_cell.yaml"
    config_file.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return subprocess.run([sys.executable, "-m", backend.child_module, str(config_file)]).returncode


def default_bc_fn(cfg):
    # lazy: keeps numpy, tokenizers, torch, transformers out of this module's import
    from arena.bc.train import ensure_bc_checkpoint

    return ensure_bc_checkpoint(cfg)


def set_job_env(env: dict[str, str], threads: Optional[int]) -> None:
    """Provenance env vars from the driver, and the torch thread count of this job.

    torch reads OMP_NUM_THREADS when it is first imported (by the train fn), so the job itself
    doesn't import torch (~2-3 s); only a torch imported already gets set_num_threads. The
    driver's glibc malloc settings are set again here (arena/malloc_tuning.py), as in every verb."""
    os.environ.update(env)
    malloc_tuning.tune_malloc()
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["MKL_NUM_THREADS"] = str(threads)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads)


def run_cell(cfg, *, env: dict[str, str], threads: Optional[int] = None,
             train_fn: Optional[Callable] = None) -> str:
    set_job_env(env, threads)
    pin_code_state()  # the code this cell runs, read now (not the driver's at the sweep's start)
    run = RunFolder(cfg.out, expect_cell_id=Path(cfg.out).name)  # a sweep cell's folder is named by its id
    if run.done:
        return DONE
    with CellLock(run.path) as held:
        if not held:
            return BUSY
        if run.done:  # finished while we waited for the lock
            return DONE
        foreign = run.foreign_cell()
        if foreign:  # another cell's run (copied here): resuming its checkpoint would mix two configs
            run.write_error(f"{run.summary_file} is the summary of cell {foreign}, not of {run.path.name}: this folder "
                            f"holds another cell's run (copied from another sweep?). Nothing was changed; move the "
                            f"folder away and rerun the sweep to run this cell.\n")
            return FAILED
        run.set_aside_summary()  # an unreadable summary.json: kept aside, the cell runs again
        if run.error_file.exists():  # a retry: keep the old traceback aside, not as this run's
            os.replace(run.error_file, run.path / f"error.{int(time.time())}.prev.txt")
        try:
            with recording(run.path):  # command.txt and run.log (arena.runs.run_log)
                code = (train_fn or default_train_fn)(cfg)
        except Exception as exc:
            _write_error_if_room(run, f"{out_of_space_message(exc)}\n" if out_of_space(exc) else traceback.format_exc())
            return FAILED
        if run.done:
            return DONE
        if not run.error_file.exists():
            problem = run.summary_problem()
            run.write_error(f"training returned exit code {code} without a valid {SUMMARY_FILE} ({problem})\n")
        return FAILED


def _write_error_if_room(run: RunFolder, text: str) -> None:
    """error.txt, unless the disk is too full to hold even that (the outcome says failed anyway)."""
    try:
        run.write_error(text)
    except OSError as exc:
        if not out_of_space(exc):
            raise


def run_bc(cfg, *, env: dict[str, str], threads: Optional[int] = None, bc_fn: Optional[Callable] = None) -> str:
    """The BC stage of one (env, bc config): raises on failure so SLURM's afterok holds the cells."""
    set_job_env(env, threads)
    return str((bc_fn or default_bc_fn)(cfg))
