"""The runs `arena findings` reads (docs/testbed.md, "Findings table"): committed run tables
(`<name>_runs.csv`, checked row by row, with the `<name>_metrics.csv` beside each) or a results
dir's sweeps, normalised to the columns the findings read (arena/analysis/findings.py, the input).
A row whose config_hash is not today's for its budget and env is labelled `<budget>@<hash>`. A
committed table is checked first (`check_run_table`): successes in [0, 1], integer seeds, known
statuses, no score on a failed or missing row, one row per (sweep, arm, env, seed); a bad row is a
ValueError naming the file and line."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from arena.config import load_config
from arena.config.load import settings_hash
from arena.runs.layout import MANIFEST_FILE, Results

from . import measures
from .claims import load_claims
from .frames import runs_frame, tidy_frame

TEXT_COLUMNS = ("sweep", "arm", "env", "status", "budget", "git_sha", "recorded_in", "command", "source", "config_hash",
                "config_overrides")
STATUSES = ("done", "collapsed", "no_format", "failed", "missing")  # arena.analysis.frames.STATUSES
UNSCORED = ("failed", "missing")  # statuses that carry no eval success


def _stable_value(value):
    """A run's `stable` (bool, "true"/"false", "unresolved", empty) as True / False / None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return {"true": True, "false": False}.get(str(value).strip().lower())


def normalise_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The columns the findings read, with text columns as text ('' when absent) and `stable` as
    True / False / None."""
    runs = runs.copy()
    for col in TEXT_COLUMNS:
        runs[col] = runs[col].fillna("").astype(str) if col in runs else ""
    runs["seed"] = runs["seed"].astype(int)
    for col in ("final_eval_success", "initial_eval_success"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce").astype(float)
    runs["stable"] = [_stable_value(v) for v in runs["stable"]] if "stable" in runs else None
    runs["budget"] = budget_labels(runs)
    return runs


@functools.lru_cache(maxsize=None)
def todays_settings_hash(budget: str, env: str, overrides: str) -> Optional[str]:
    """settings_hash of today's `budget=<budget> env=<env>` (leaving out the `overrides` keys, comma
    separated), or None when today's configs have no such budget or env."""
    try:
        return settings_hash(load_config([f"budget={budget}", f"env={env}"]), [k for k in overrides.split(",") if k])
    except Exception:  # a budget or env that is gone: no today's config to match
        return None


def budget_labels(runs: pd.DataFrame) -> list[str]:
    """Each row's budget, as `<budget>@<config_hash>` where its settings are not today's budget's
    (a row with no config_hash keeps its label: transcribed rows name their keys in `command`)."""
    return [b if not (b and h) or h == todays_settings_hash(b, e, o) else f"{b}@{h}"
            for b, e, h, o in zip(runs["budget"], runs["env"], runs["config_hash"], runs["config_overrides"])]


def check_run_table(frame: pd.DataFrame, path: Path) -> None:
    """ValueError naming `path` and the line of the first bad row (module docstring); line 1 is the header."""
    def bad(i: int, what: str) -> ValueError:
        return ValueError(f"{path}, line {i + 2}: {what}")

    for i, row in frame.iterrows():
        seed = pd.to_numeric(pd.Series([row.get("seed")]), errors="coerce").iloc[0]
        if pd.isna(seed) or float(seed) != int(seed):
            raise bad(i, f"seed={row.get('seed')!r}; valid: an integer")
        for col in ("final_eval_success", "initial_eval_success"):
            value = pd.to_numeric(pd.Series([row.get(col)]), errors="coerce").iloc[0]
            if pd.notna(row.get(col)) and not (pd.notna(value) and 0.0 <= value <= 1.0):
                raise bad(i, f"{col}={row.get(col)!r}; valid: empty or a fraction in [0, 1]")
        status = row.get("status")
        if "status" in frame and status not in STATUSES:
            raise bad(i, f"status={status!r}; valid: {', '.join(STATUSES)}")
        if status in UNSCORED and pd.notna(row.get("final_eval_success")):
            raise bad(i, f"status={status} with final_eval_success={row['final_eval_success']!r}; a {status} run "
                         "has no score: leave final_eval_success empty")
    key = frame[["sweep", "arm", "env"]].astype(str).assign(seed=pd.to_numeric(frame["seed"]).astype(int))
    twice = key.duplicated(keep=False)
    if twice.any():
        lines = [i + 2 for i in frame.index[twice]]
        first = key[twice].iloc[0]
        raise ValueError(f"{path}, lines {', '.join(map(str, lines))}: (sweep, arm, env, seed) = ({first['sweep']}, "
                         f"{first['arm']}, {first['env']}, {first['seed']}) more than once; valid: one row per run")


def read_run_tables(path: str | Path) -> pd.DataFrame:
    """The committed run tables: one `<name>_runs.csv` file, or every such file in a folder (name order)."""
    path = Path(path)
    files = sorted(path.glob("*_runs.csv")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"no <name>_runs.csv file at {path}")
    frames = [pd.read_csv(f, keep_default_na=False, na_values=[""], dtype={c: str for c in TEXT_COLUMNS})
              for f in files]
    # a report's runs table (analysis/tidy_csv.py export) has no sweep column: its file names it
    frames = [frame if "sweep" in frame else frame.assign(sweep=f.name.removesuffix("_runs.csv"))
              for f, frame in zip(files, frames)]
    for f, frame in zip(files, frames):
        check_run_table(frame, f)
    runs = normalise_runs(pd.concat(frames, ignore_index=True))
    return measures.add_measures(runs, _metrics_beside(files, frames) if _needs_curves() else None)


def _needs_curves() -> bool:
    """Whether a finding's measure reads the eval curves (the metrics table), not the runs alone."""
    return any(c.measure == measures.DROP_FROM_BEST for c in load_claims())


def _metrics_beside(files: Sequence[Path], frames: Sequence[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """The `<name>_metrics.csv` beside each `<name>_runs.csv` (analysis/tidy_csv.py export), with the
    runs file's sweep; None when there is none (a measure that needs the curves is then NaN)."""
    parts = []
    for f, frame in zip(files, frames):
        metrics = f.with_name(f.name.removesuffix("_runs.csv") + "_metrics.csv")
        if metrics.is_file():
            parts.append(pd.read_csv(metrics).assign(sweep=str(frame["sweep"].iloc[0])))
    return pd.concat(parts, ignore_index=True) if parts else None


def read_results_dir(results_dir: str | Path) -> pd.DataFrame:
    """Every sweep of a results dir (`<results_dir>/sweeps/<name>/manifest.json`), its report runs."""
    results = Results(results_dir)
    names = [p.parent.name for p in results.sweep_manifests()]
    if not names:
        raise FileNotFoundError(f"no sweep under {results.sweeps} (no */{MANIFEST_FILE})")
    runs = normalise_runs(runs_frame(results_dir, names))
    if not _needs_curves():
        return measures.add_measures(runs)

    return measures.add_measures(runs, tidy_frame(results_dir, names, runs=runs))
