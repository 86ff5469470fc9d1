"""The two frames every table and plot is a function of (docs/design.md, Report).

runs_frame:  one row per run of the sweep's manifest (role "report" by default), built from
             summary.json. A run without summary.json is `failed` (error.txt present) or
             `missing`; its scores stay NaN, never zero.
tidy_frame:  one row per (run, step, metric) from metrics.jsonl, with the run's columns.

Run columns: sweep, run (the cell_id), arm, env, seed, role, status; the choices method, group,
aggregation, clipping, seq_mask_delta, filtering, advantage, agg_norm; hyperparameters as
`hp.<name>` (the resolved PO hyperparameters, defaults filled in) plus the run-level ones in
RUN_HP; the summary's scores and provenance (SUMMARY_KEYS).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from arena.config import resolve_po
from arena.config.load import settings_hash
from arena.po.methods import METHODS
from arena.runs.folder import RunFolder
from arena.runs.layout import Results

from .manifest import load_manifest

CHOICES = ("method", "group", "aggregation", "clipping", "seq_mask_delta", "filtering", "advantage", "agg_norm")
RUN_HP = ("lr", "kl_coef", "entropy_coef", "group_size", "batch_envs", "ppo_epochs", "ppo_mini_batch_size",
          "ppo_num_mini_batches", "steps", "budget", "backend")
SUMMARY_KEYS = ("final_eval_success", "initial_eval_success", "var_last20", "noise_floor", "theta", "stable",
                "n_eval", "wall_seconds", "git_sha", "git_dirty", "code_hash", "host", "slurm_job_id")
ID_COLUMNS = ("sweep", "run", "arm", "env", "seed", "role", "status")
STATUSES = ("done", "collapsed", "no_format", "failed", "missing")


def _choices_from_config(path: Path, overrides: Any = None) -> dict[str, Any]:
    """The resolved choices and hyperparameters of a run's config.yaml (an OmegaConf dump), and
    the hash of the settings its sweep's cells share (`config_hash`: arena.config.load.settings_hash,
    leaving out the keys of the arm's `overrides`, named in `config_overrides`)."""
    cfg = OmegaConf.load(path)
    po = resolve_po(cfg)
    out: dict[str, Any] = {dim: getattr(po, dim) for dim in CHOICES}
    out.update({f"hp.{k}": v for k, v in po.effective_hp().items()})
    out.update({k: cfg.get(k) for k in RUN_HP})
    keys = sorted({str(k).split(".")[0] for k in (overrides or {})} - {"po"})
    out.update(config_hash=settings_hash(cfg, keys), config_overrides=",".join(keys))
    return out


def _run_row(results_dir: Path, name: str, cell: dict[str, Any]) -> dict[str, Any]:
    run = RunFolder(Results(results_dir).cell(name, cell["cell_id"]), expect_cell_id=cell["cell_id"])
    row: dict[str, Any] = {"sweep": name, "run": cell["cell_id"], "arm": cell["arm"], "env": cell["env"],
                           "seed": int(cell["seed"]), "role": cell["role"]}
    method = cell.get("method")
    row.update({"method": method, "group": METHODS[method].group if method in METHODS else None})
    if run.config_file.exists():
        row.update(_choices_from_config(run.config_file, cell.get("overrides")))
    summary = run.summary()
    if summary is not None:
        row["status"] = summary.get("status", "done")
        row.update({k: summary.get(k) for k in SUMMARY_KEYS})
    else:
        row["status"] = "failed" if run.error_file.exists() else "missing"
    return row


def runs_frame(results_dir: str | Path, names: str | Sequence[str], *, roles: Iterable[str] = ("report",)) -> pd.DataFrame:
    """One row per run of the named sweep(s) whose manifest role is in `roles`."""
    results_dir = Path(results_dir).resolve()
    names = [names] if isinstance(names, str) else list(names)
    roles = set(roles)
    rows = []
    for name in names:
        manifest = load_manifest(results_dir, name)
        rows += [_run_row(results_dir, name, c) for c in manifest["cells"] if c["role"] in roles]
    frame = pd.DataFrame(rows)
    for col in CHOICES + SUMMARY_KEYS:
        if col not in frame:
            frame[col] = None
    for col in ("final_eval_success", "initial_eval_success", "var_last20", "noise_floor", "theta", "wall_seconds"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)  # None -> NaN, never 0
    lead = [c for c in ID_COLUMNS + CHOICES if c in frame]
    rest = sorted(c for c in frame.columns if c not in lead)
    return frame[lead + rest].reset_index(drop=True)


def _metric_rows(results_dir: Path, sweep: str, run_id: str) -> pd.DataFrame:
    rows = RunFolder(Results(results_dir).cell(sweep, run_id)).read_metrics()
    if not rows:
        return pd.DataFrame(columns=["sweep", "run", "step", "metric", "value"])
    wide = pd.DataFrame(rows)
    long = wide.melt(id_vars=["step"], var_name="metric", value_name="raw")
    # metrics.jsonl stores non-finite numbers as strings ("nan", "inf"): parse those and keep
    # them; drop text values and the holes of metrics a row did not log
    long["value"] = pd.to_numeric(long["raw"], errors="coerce").astype(float)
    logged_nan = long["raw"].map(lambda v: isinstance(v, str) and v.lower() == "nan")
    long = long[long["value"].notna() | logged_nan].drop(columns="raw")
    long.insert(0, "run", run_id)
    long.insert(0, "sweep", sweep)
    return long


def tidy_frame(results_dir: str | Path, names: str | Sequence[str], *, runs: pd.DataFrame | None = None,
               roles: Iterable[str] = ("report",)) -> pd.DataFrame:
    """One row per (run, step, metric): run, step, metric, value + every column of the runs frame."""
    results_dir = Path(results_dir).resolve()
    runs = runs_frame(results_dir, names, roles=roles) if runs is None else runs
    parts = [_metric_rows(results_dir, r.sweep, r.run) for r in runs[["sweep", "run"]].itertuples()]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=["sweep", "run", "step", "metric", "value", *runs.columns.drop(["sweep", "run"])])
    long = pd.concat(parts, ignore_index=True)
    long["step"] = long["step"].astype(np.int64)
    tidy = long.merge(runs, on=["sweep", "run"], how="left", validate="many_to_one")
    return tidy.sort_values(["sweep", "arm", "env", "seed", "metric", "step"], kind="stable").reset_index(drop=True)
