"""What a launched job runs: take the cell's lock, train (resuming from the run's checkpoint),
release. Returns the cell's outcome as a string: "done", "failed" or "busy" (another live
process holds the cell: this job ran nothing). Never raises for a training failure: the
traceback goes to `<cell>/error.txt`."""
from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

from .ledger import BUSY, DONE, FAILED, CellLock


def default_train_fn(cfg) -> int:
    from arena.backends.embedded.run import run_training

    return run_training(cfg)


def default_bc_fn(cfg):
    from arena.backends.embedded.bc import ensure_bc_checkpoint

    return ensure_bc_checkpoint(cfg)


def set_job_env(env: dict[str, str], threads: Optional[int]) -> None:
    """Provenance env vars from the driver, and the torch thread count of this job."""
    os.environ.update(env)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["MKL_NUM_THREADS"] = str(threads)
        try:
            import torch

            torch.set_num_threads(threads)
        except ImportError:
            pass


def run_cell(cfg, *, env: dict[str, str], threads: Optional[int] = None,
             train_fn: Optional[Callable] = None) -> str:
    set_job_env(env, threads)
    cell_dir = Path(cfg.out)
    if (cell_dir / "summary.json").exists():
        return DONE
    with CellLock(cell_dir) as held:
        if not held:
            return BUSY
        if (cell_dir / "summary.json").exists():  # finished while we waited for the lock
            return DONE
        previous_error = cell_dir / "error.txt"
        if previous_error.exists():  # a retry: keep the old traceback aside, not as this run's
            os.replace(previous_error, cell_dir / f"error.{int(time.time())}.prev.txt")
        try:
            code = (train_fn or default_train_fn)(cfg)
        except Exception:
            (cell_dir / "error.txt").write_text(traceback.format_exc())
            return FAILED
        if (cell_dir / "summary.json").exists():
            return DONE
        if not (cell_dir / "error.txt").exists():
            (cell_dir / "error.txt").write_text(f"training returned exit code {code} without writing summary.json\n")
        return FAILED


def run_bc(cfg, *, env: dict[str, str], threads: Optional[int] = None, bc_fn: Optional[Callable] = None) -> str:
    """The BC stage of one (env, bc config): raises on failure so SLURM's afterok holds the cells."""
    set_job_env(env, threads)
    return str((bc_fn or default_bc_fn)(cfg))
