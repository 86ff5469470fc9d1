"""What a finding compares, per run (docs/methods.md §14, "Measures"): each finding of findings.yaml names
its `measure` (default `final`), and its comparison is the paired per-seed difference of that measure.

Per run r, as a fraction of episodes (the callers turn differences into points, x100):
  final           x_r = final eval success (the summary's final_eval_success)
  drop_from_best  x_r = max over the run's eval points (step-0 eval, every `eval/success_rate` of the
                  metrics table, the final eval) - final eval success; >= 0; 0 when the run ends at its best.
                  "Learns fast, then falls" (Finding 1) is a large drop. NaN when the run has no eval curve
                  in the metrics table (a runs table without its metrics file).
  collapsed       x_r = 1 if the run fell by its own rules: the collapse rule fired (status `collapsed`) or
                  the stability criterion judged it unstable (`stable` false; "unresolved" is not a fall);
                  0 for any other finished run (done, no_format); NaN for failed or missing runs. A
                  difference of two indicators per seed, in points: +100 when only the arm fell.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

FINAL, DROP_FROM_BEST, COLLAPSED = "final", "drop_from_best", "collapsed"
MEASURES = {
    FINAL: "final eval success",
    DROP_FROM_BEST: "fall from the run's best eval to its final eval",
    COLLAPSED: "fall indicator (the run collapsed or was unstable)",
}
DEFAULT = FINAL
EVAL_METRIC = "eval/success_rate"
FINISHED = ("done", "collapsed", "no_format")
KEYS = ("sweep", "arm", "env", "seed")


def column(measure: str) -> str:
    """The runs-table column that holds a measure (fractions; final is the summary's own column)."""
    return "final_eval_success" if measure == FINAL else f"measure_{measure}"


def check(measure: str, where: str = "measure") -> str:
    """`measure` when it is one of MEASURES, else ValueError naming the valid ones."""
    if measure not in MEASURES:
        raise ValueError(f"{where}={measure!r}: valid: {', '.join(MEASURES)}")
    return measure


def best_eval(runs: pd.DataFrame, tidy: Optional[pd.DataFrame]) -> pd.Series:
    """Per run (runs' index): max(step-0 eval, every eval point of the metrics table, final eval);
    NaN when the metrics table has no eval point for the run."""
    if tidy is None or tidy.empty or "metric" not in tidy:
        return pd.Series(np.nan, index=runs.index)
    keys = [k for k in KEYS if k in runs and k in tidy]
    evals = tidy[tidy["metric"] == EVAL_METRIC]
    curve_max = evals.groupby(keys)["value"].max()  # [(sweep, arm, env, seed)]
    joined = runs[keys].merge(curve_max.rename("curve_max").reset_index(), on=keys, how="left")
    points = np.column_stack([joined["curve_max"].to_numpy(float),  # [runs, 3]
                              pd.to_numeric(runs["initial_eval_success"], errors="coerce").to_numpy(float),
                              pd.to_numeric(runs["final_eval_success"], errors="coerce").to_numpy(float)])
    with np.errstate(all="ignore"):
        best = np.where(np.isfinite(points[:, 0]), np.nanmax(points, axis=1), np.nan)  # [runs]
    return pd.Series(best, index=runs.index)


def add_measures(runs: pd.DataFrame, tidy: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """runs with a column per measure (column(m)), fractions of episodes (see the module docstring)."""
    runs = runs.copy()
    final = pd.to_numeric(runs["final_eval_success"], errors="coerce").astype(float)
    runs[column(DROP_FROM_BEST)] = best_eval(runs, tidy) - final
    status = runs["status"].astype(str) if "status" in runs else pd.Series("", index=runs.index)
    runs[column(COLLAPSED)] = np.where(status.isin(FINISHED), fell(runs).astype(float), np.nan)
    return runs


def fell(rows: pd.DataFrame) -> pd.Series:
    """Per run: the collapse rule fired (status `collapsed`) or the stability criterion said unstable
    (`stable` false: a bool, or the text "false" of a runs table)."""
    collapsed = rows["status"].astype(str) == "collapsed" if "status" in rows else pd.Series(False, index=rows.index)
    unstable = rows["stable"].map(lambda v: v is False or isinstance(v, np.bool_) and not v
                                  or str(v).strip().lower() == "false") if "stable" in rows else False
    return collapsed | unstable


def collapsed_runs(rows: pd.DataFrame) -> int:
    """How many of these runs fell by their own rules (fell: collapsed or unstable)."""
    return int(fell(rows).sum()) if len(rows) else 0
