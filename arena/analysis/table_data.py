"""The numbers behind the report table: a function of the runs frame and the manifest.

Per (arm, env) cell, over the seeds whose run finished (status done or collapsed; a collapsed
run's last eval is a real outcome and counts). Failed and missing runs are counted, never
scored as zero. Scores are final_eval_success in points (x100).
    mean, std (ddof=1), n_seeds, 95% bootstrap CI over seeds (None when n < 3)
    Avg over envs: mean = (1/M) sum_m mean_m, with a stratified bootstrap CI (seeds resampled
    within each env); NaN when an env has no finished seed (std is not defined for Avg)
    delta_vs_grpo = mean - mean_GRPO (points); rel_vs_grpo = delta / mean_GRPO where mean_GRPO >= 10
    stable: "yes" if every seed finished and is stable; "no" if a finished seed is not stable
    (false, "unresolved" or collapsed); "?" when seeds are missing/failed and the rest are stable
Per arm: IQM over the pooled (env, seed) scores; P(arm > GRPO) (stats.probability_of_improvement).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from arena.po.methods import GROUPS

from . import stats

FINISHED = ("done", "collapsed")
AVG = "Avg"
POINTS = 100.0


def baseline_arm(manifest: dict[str, Any]) -> Optional[str]:
    """The GRPO arm: the arm named "grpo", else the first grid arm running preset grpo unchanged."""
    if "grpo" in manifest["grid"]:
        return "grpo"
    plain = {c["arm"] for c in manifest["cells"] if c.get("method") == "grpo" and not c.get("overrides")}
    return next((a for a in manifest["grid"] if a in plain), None)


def arm_order(runs: pd.DataFrame, manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """(group, arm) rows: grouped by preset group in the paper's order, grid order inside a group."""
    group_of = runs.drop_duplicates("arm").set_index("arm")["group"].to_dict()
    rank = {g: i for i, g in enumerate(GROUPS)}
    arms = [a for a in manifest["grid"] if a in group_of]
    keyed = sorted(((rank.get(group_of[a] or "", len(GROUPS)), i, a) for i, a in enumerate(arms)))
    return [(group_of[a] or "other", a) for _, _, a in keyed]


def env_order(runs: pd.DataFrame, manifest: dict[str, Any]) -> list[str]:
    """The manifest's `envs` order when it has one, else first appearance among the cells."""
    present = list(dict.fromkeys(runs["env"]))
    return [e for e in manifest.get("envs", []) if e in present] + [e for e in present if e not in manifest.get("envs", [])]


def _is_true(value: Any) -> bool:
    """summary's `stable` is true | false | "unresolved"; only a real boolean true counts."""
    return isinstance(value, (bool, np.bool_)) and bool(value)


def _stable_flag(cell: pd.DataFrame) -> str:
    finished = cell[cell["status"].isin(FINISHED)]
    flags = [_is_true(s) and status == "done" for s, status in zip(finished["stable"], finished["status"])]
    if not all(flags):
        return "no"
    return "yes" if len(finished) == len(cell) and len(cell) > 0 else "?"


def _scores(cell: pd.DataFrame) -> np.ndarray:
    finished = cell[cell["status"].isin(FINISHED)]
    return (finished["final_eval_success"].dropna().to_numpy(dtype=float) * POINTS)  # [n_seeds]


def build_table(runs: pd.DataFrame, manifest: dict[str, Any], chosen: dict[tuple[str, str], Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, arms): cells has one row per (arm, env) plus (arm, Avg); arms one row per arm."""
    envs = env_order(runs, manifest)
    base = baseline_arm(manifest)
    scores = {(a, e): _scores(c) for (a, e), c in runs.groupby(["arm", "env"], sort=False)}
    base_scores = {e: scores.get((base, e), np.array([])) for e in envs}
    base_means = {e: stats.mean_std(s)[0] for e, s in base_scores.items()}
    base_means[AVG] = float(np.mean(list(base_means.values()))) if envs else float("nan")
    cell_rows, arm_rows = [], []
    for group, arm in arm_order(runs, manifest):
        arm_runs = runs[runs["arm"] == arm]
        method = arm_runs["method"].iloc[0]
        per_env = []
        for env in envs:
            cell = arm_runs[arm_runs["env"] == env]
            x = scores.get((arm, env), np.array([]))
            mean, std = stats.mean_std(x)
            ci = stats.stratified_bootstrap_ci([x])
            per_env.append(dict(arm=arm, method=method, group=group, env=env, n_seeds=len(x),
                                n_failed=int((cell["status"] == "failed").sum()),
                                n_missing=int((cell["status"] == "missing").sum()),
                                mean=mean, std=std, ci_low=ci[0] if ci else np.nan, ci_high=ci[1] if ci else np.nan,
                                stable=_stable_flag(cell)))
        xs = [scores.get((arm, e), np.array([])) for e in envs]
        complete = all(len(x) for x in xs)
        ci = stats.stratified_bootstrap_ci(xs) if complete else None
        flags = [r["stable"] for r in per_env]
        avg = dict(arm=arm, method=method, group=group, env=AVG, n_seeds=sum(r["n_seeds"] for r in per_env),
                   n_failed=sum(r["n_failed"] for r in per_env), n_missing=sum(r["n_missing"] for r in per_env),
                   mean=float(np.mean([r["mean"] for r in per_env])) if complete else np.nan, std=np.nan,
                   ci_low=ci[0] if ci else np.nan, ci_high=ci[1] if ci else np.nan,
                   stable="no" if "no" in flags else ("yes" if flags and set(flags) == {"yes"} else "?"))
        for row in per_env + [avg]:
            ref = base_means.get(row["env"], np.nan)
            if arm == base or not np.isfinite(ref) or not np.isfinite(row["mean"]):
                row.update(delta_vs_grpo=np.nan, rel_vs_grpo=np.nan)
            else:
                delta, rel = stats.change_vs_baseline(row["mean"], ref)
                row.update(delta_vs_grpo=delta, rel_vs_grpo=np.nan if rel is None else rel)
            cell_rows.append(row)
        pooled = np.concatenate(xs) if xs else np.array([])  # [sum_m n_m]
        p_improve = np.nan if arm == base or base is None else stats.probability_of_improvement(
            {e: x for e, x in zip(envs, xs)}, base_scores)
        arm_rows.append(dict(arm=arm, method=method, group=group, n_runs=len(pooled), iqm=stats.iqm(pooled),
                             p_improve_vs_grpo=p_improve, stable=dict(zip(envs, flags)),
                             chosen_hp={e: chosen[(arm, e)] for e in envs if chosen.get((arm, e)) is not None}))
    return pd.DataFrame(cell_rows), pd.DataFrame(arm_rows)
