"""The numbers behind the report table: a function of the runs frame and the manifest
(docs/design.md, Report; formulas in docs/methods.md, Statistics).

Scores are in points (x100), over the seeds whose run finished (status done, collapsed or no_format;
a collapsed run's last eval is a real outcome and counts). Failed and missing runs are counted,
never scored as zero. Per (arm, env) cell:
    mean, std (ddof=1), n_seeds, 95% bootstrap CI over seeds (None when n < 3)
    start = mean over seeds of the step-0 eval (the BC policy); gain_s = final_s - start_s per seed
    diff_s = final_s(arm) - final_s(baseline) on the same seed s (the same BC start and eval rooms)
    stable: "yes" if every seed finished and is stable; "no" if a finished seed is not stable
        (false, "unresolved" or collapsed); "?" when seeds are missing/failed and the rest are stable
Avg row: the final mean and start averaged over envs, (1/M) sum_m stat_m, with a CI stratified over envs.
Per arm: IQM over the pooled (env, seed) scores with a stratified CI; unpaired P(arm > baseline)
with a stratified CI.

Gain and diff follow the one verdict rule (arena/analysis/verdicts.py): per env, d_s over the seeds
with a pair; on the Avg row d_s = (1/M) sum_m d_{m,s} over the seeds paired in every env. Each
column is one family: the gains of all arms (did each arm learn?), and the diffs of all arms but
the baseline (k arms against one baseline), Holm within it; and the twins (Finding 2): each arm
named X_sm whose grid also has X, twin_s = final_s(X_sm) - final_s(X), the sequence mask's own
effect, one family over those pairs. Each gives mean, its interval at the
family-adjusted level, n, p (Holm-adjusted), mde, seeds_needed and verdict. No verdict comes from
a bootstrap CI.

One rule for missing data, on every aggregate over environments (Avg mean, start, gain and diff;
IQM; P): it is computed only when every env has at least one finished seed of the arm (and, for a
comparison, a finished baseline seed / a seed pair); otherwise it is NaN and `missing` names the
envs that lack them, so every renderer marks it the same way.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from arena.po.methods import GROUPS

from . import stats, verdicts

FINISHED = ("done", "collapsed", "no_format")
AVG = "Avg"
POINTS = 100.0
NAN = float("nan")


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


def unmasked_twin(arm: str, arms: list[str]) -> Optional[str]:
    """X for an arm named X_sm when X is an arm of the same grid (CISPO_SM and CISPO): the pair that
    differs in the sequence mask alone (docs/methods.md, the `_SM` presets); None otherwise."""
    return arm[: -len("_sm")] if arm.endswith("_sm") and arm[: -len("_sm")] in arms else None


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


def _by_seed(cell: pd.DataFrame, column: str) -> dict[int, float]:
    """seed -> score in points, finished runs with a finite value only."""
    finished = cell[cell["status"].isin(FINISHED)]
    return {int(s): float(v) * POINTS for s, v in zip(finished["seed"], finished[column]) if np.isfinite(v)}


def _values(by_seed: dict[int, float]) -> np.ndarray:
    return np.array([by_seed[s] for s in sorted(by_seed)], dtype=float)  # [n_seeds]


def _lacking(samples: dict[str, np.ndarray]) -> str:
    """The missing-data rule: the envs with no value, comma-joined ("" = complete)."""
    return ", ".join(env for env, x in samples.items() if len(x) == 0)


def _mean_ci(samples: dict[str, np.ndarray], ci_fn=stats.stratified_bootstrap_ci) -> tuple[float, float, float, str]:
    """(mean over envs of per-env means, ci_low, ci_high, missing); NaN when an env lacks values."""
    missing = _lacking(samples)
    if missing or not samples:
        return NAN, NAN, NAN, missing
    ci = ci_fn(list(samples.values()))
    mean = float(np.mean([np.mean(x) for x in samples.values()]))
    return mean, *(ci if ci else (NAN, NAN)), ""


def _column_diffs(pairs_by_env: dict[str, dict[int, float]], env: str) -> tuple[Optional[list[float]], str]:
    """(the d_s of one table column, missing): one env's d_s (stats.paired_differences_by_seed), or
    on the Avg row d_s = (1/M) sum_m d_{m,s} over the seeds paired in every env. `missing` names the
    envs that lack a pair: an env without one gives [], an Avg row the missing-data rule leaves out
    gives None."""
    if env != AVG:
        return list(pairs_by_env[env].values()), "" if pairs_by_env[env] else env
    missing = ", ".join(e for e, d in pairs_by_env.items() if not d)
    if missing or not pairs_by_env:
        return None, missing
    common = sorted(set.intersection(*(set(d) for d in pairs_by_env.values())))
    return [float(np.mean([d[s] for d in pairs_by_env.values()])) for s in common], ""


def compare_columns(pairs: dict[str, dict[str, dict[int, float]]], columns: list[str], *,
                    min_effect: float, alpha: float = verdicts.ALPHA) -> dict[tuple[str, str], tuple[Optional[verdicts.Comparison], str]]:
    """(arm, column) -> (Comparison or None, missing): one family per column over the arms given
    (pairs: arm -> env -> seed -> d_s); an arm with no pair in the column is not compared."""
    out = {}
    for env in columns:
        family, missing = {}, {}
        for arm, by_env in pairs.items():
            d, missing[arm] = _column_diffs(by_env, env)
            if d:
                family[arm] = d
        results = verdicts.compare_family(family, min_effect=min_effect, alpha=alpha)
        out.update({(arm, env): (results.get(arm), missing[arm]) for arm in pairs})
    return out


def _stat_columns(prefix: str, comparison: Optional[verdicts.Comparison], missing: str) -> dict[str, Any]:
    """prefix, prefix_ci_low, prefix_ci_high, prefix_n, prefix_p, prefix_mde, prefix_seeds_needed,
    prefix_verdict, prefix_missing for one (arm, column); p is the Holm-adjusted p-value."""
    if comparison is None:
        return {**_blank(prefix), f"{prefix}_missing": missing}
    c = comparison
    return {prefix: c.mean, f"{prefix}_ci_low": c.low, f"{prefix}_ci_high": c.high, f"{prefix}_n": c.n,
            f"{prefix}_p": c.p_adjusted, f"{prefix}_mde": c.mde, f"{prefix}_seeds_needed": c.seeds_needed or 0,
            f"{prefix}_verdict": c.verdict, f"{prefix}_missing": ""}


def _blank(prefix: str) -> dict[str, Any]:
    """The columns of _stat_columns with no comparison (the baseline against itself, no pairs)."""
    return {prefix: NAN, f"{prefix}_ci_low": NAN, f"{prefix}_ci_high": NAN, f"{prefix}_n": 0, f"{prefix}_p": NAN,
            f"{prefix}_mde": NAN, f"{prefix}_seeds_needed": 0, f"{prefix}_verdict": "", f"{prefix}_missing": ""}


def _cell_row(arm: str, env: str, cell: pd.DataFrame, final: dict[str, np.ndarray]) -> dict[str, Any]:
    chosen = final if env == AVG else {env: final[env]}
    mean, low, high, missing = _mean_ci(chosen)
    std = stats.mean_std(final[env])[1] if env != AVG else NAN
    return dict(env=env, n_seeds=sum(len(x) for x in chosen.values()), n_failed=int((cell["status"] == "failed").sum()),
                n_missing=int((cell["status"] == "missing").sum()), mean=mean, std=std, ci_low=low, ci_high=high,
                missing=missing)


def build_table(runs: pd.DataFrame, manifest: dict[str, Any], chosen: dict[tuple[str, str], Any], *,
                baseline: Optional[str] = None, min_effect: float = verdicts.MIN_EFFECT,
                alpha: float = verdicts.ALPHA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, arms): cells has one row per (arm, env) plus (arm, Avg); arms one row per arm.
    `baseline` is the arm every other arm is compared to (default: baseline_arm(manifest));
    `min_effect` (points) is the difference a "no difference" verdict must rule out; `alpha` the
    family-wise level (an older seeds=auto manifest's per-look level: docs/design.md, Sweep: seeds=auto)."""
    envs = env_order(runs, manifest)
    base = baseline or baseline_arm(manifest)
    groups = {key: cell for key, cell in runs.groupby(["arm", "env"], sort=False)}
    empty = runs.iloc[:0]
    final_by_seed = {k: _by_seed(c, "final_eval_success") for k, c in groups.items()}
    start_by_seed = {k: _by_seed(c, "initial_eval_success") for k, c in groups.items()}
    base_final = {e: final_by_seed.get((base, e), {}) for e in envs}
    order = arm_order(runs, manifest)
    pairs = stats.paired_differences_by_seed
    gains = {arm: {e: pairs(final_by_seed.get((arm, e), {}), start_by_seed.get((arm, e), {})) for e in envs}
             for _, arm in order}  # arm -> env -> seed -> final_s - start_s
    diffs = {arm: {e: pairs(final_by_seed.get((arm, e), {}), base_final[e]) for e in envs}
             for _, arm in order if base is not None and arm != base}  # arm -> env -> seed -> arm_s - base_s
    names = [arm for _, arm in order]
    twin_of = {arm: unmasked_twin(arm, names) for arm in names}
    twins = {arm: {e: pairs(final_by_seed.get((arm, e), {}), final_by_seed.get((twin, e), {})) for e in envs}
             for arm, twin in twin_of.items() if twin}  # X_sm -> env -> seed -> X_sm_s - X_s
    gain_cmp = compare_columns(gains, envs + [AVG], min_effect=min_effect, alpha=alpha)
    twin_cmp = compare_columns(twins, envs + [AVG], min_effect=min_effect, alpha=alpha)
    diff_cmp = compare_columns(diffs, envs + [AVG], min_effect=min_effect, alpha=alpha)
    cell_rows, arm_rows = [], []
    moved = base if baseline is not None and baseline != baseline_arm(manifest) else None  # baseline=X, X not GRPO
    for preset_group, arm in order:
        group = group_label(preset_group, arm, moved)
        method = runs.loc[runs["arm"] == arm, "method"].iloc[0]
        final = {e: _values(final_by_seed.get((arm, e), {})) for e in envs}  # env -> [n_seeds]
        start = {e: _values(start_by_seed.get((arm, e), {})) for e in envs}  # env -> [n_seeds]
        flags = {e: _stable_flag(groups.get((arm, e), empty)) for e in envs}
        for env in envs + [AVG]:
            cell = runs[runs["arm"] == arm] if env == AVG else groups.get((arm, env), empty)
            row = dict(arm=arm, method=method, group=group, baseline=base or "", min_effect=min_effect,
                       **_cell_row(arm, env, cell, final))
            start_mean, _, _, start_missing = _mean_ci(start if env == AVG else {env: start[env]}, lambda s: None)
            row.update(start=start_mean, start_missing=start_missing, **_stat_columns("gain", *gain_cmp[(arm, env)]))
            row.update(_stat_columns("diff", *diff_cmp[(arm, env)]) if arm in diffs else _blank("diff"))
            row.update(_stat_columns("twin", *twin_cmp[(arm, env)]) if arm in twins else _blank("twin"))
            row["twin_of"] = twin_of[arm] or ""
            flag = list(flags.values())
            row["stable"] = flags[env] if env != AVG else ("no" if "no" in flag else "yes" if flag and set(flag) == {"yes"} else "?")
            cell_rows.append(row)
        arm_rows.append(_arm_row(arm, method, group, base, final, {e: _values(base_final[e]) for e in envs}, flags,
                                 chosen, envs))
    return pd.DataFrame(cell_rows), pd.DataFrame(arm_rows)


def group_label(group: str, arm: str, base: Optional[str]) -> str:
    """The table's group column: the preset's group; under baseline=X (`base`: X, when it is not
    the default baseline arm) "baseline" names X only: X's row reads "<its group> (baseline)" and
    the rows of the preset group "baseline" (GRPO's) read "default baseline"."""
    if base is None:
        return group
    if arm == base:
        return group if group == "baseline" else f"{group} (baseline)"
    return "default baseline" if group == "baseline" else group


def _arm_row(arm: str, method: str, group: str, base: Optional[str], final: dict[str, np.ndarray],
             base_scores: dict[str, np.ndarray], flags: dict[str, str], chosen: dict, envs: list[str]) -> dict[str, Any]:
    """The per-arm row: IQM and P(arm > baseline) with their bootstrap CIs, stability, chosen hp."""
    missing = _lacking(final)
    pooled = np.concatenate(list(final.values())) if final and not missing else np.array([])  # [sum_m n_m]
    iqm_ci = stats.iqm_ci(list(final.values())) if not missing else None
    row = dict(arm=arm, method=method, group=group, baseline=base or "", n_runs=int(sum(len(x) for x in final.values())),
               iqm=stats.iqm(pooled) if not missing else NAN, iqm_ci_low=iqm_ci[0] if iqm_ci else NAN,
               iqm_ci_high=iqm_ci[1] if iqm_ci else NAN, missing=missing)
    p_missing = ", ".join(dict.fromkeys(m for m in (missing, _lacking(base_scores)) if m))
    if arm == base or base is None or p_missing:
        row.update(p_improve=NAN, p_ci_low=NAN, p_ci_high=NAN, p_missing=p_missing if arm != base else "")
    else:
        p_ci = stats.probability_of_improvement_ci(final, base_scores)
        row.update(p_improve=stats.probability_of_improvement(final, base_scores), p_ci_low=p_ci[0] if p_ci else NAN,
                   p_ci_high=p_ci[1] if p_ci else NAN, p_missing="")
    row.update(stable=flags, chosen_hp={e: chosen[(arm, e)] for e in envs if chosen.get((arm, e)) is not None})
    return row
