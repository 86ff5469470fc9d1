"""Statistics for the report tables (issue #6; Agarwal et al. 2021, "Deep RL at the edge of the
statistical precipice"). Pure functions on plain arrays of scores; no `rliable` (it fails to
import beside pandas 3).

Scores are success rates; the caller decides the unit (the report uses points, x100).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy import stats as sps

N_RESAMPLES = 2000  # bootstrap resamples (issue: >= 2000)
BOOTSTRAP_SEED = 0  # fixed, so a rerun is byte-identical
CONFIDENCE = 0.95
MIN_SEEDS_FOR_CI = 3  # fewer seeds: "n<3", never a fake interval


def mean_std(scores: Sequence[float]) -> tuple[float, float]:
    """mean = (1/n) sum x_i; std = sqrt(sum (x_i - mean)^2 / (n - 1)) (sample std, ddof=1).

    std is NaN for n = 1 (undefined); both are NaN for n = 0.
    """
    x = np.asarray(scores, dtype=float)  # [n]
    if x.size == 0:
        return float("nan"), float("nan")
    std = float(np.std(x, ddof=1)) if x.size > 1 else float("nan")
    return float(np.mean(x)), std


def iqm(scores: Sequence[float]) -> float:
    """Interquartile mean: the 25% trimmed mean, i.e. the mean of the middle 50% of the scores.

    scipy.stats.trim_mean(x, 0.25) cuts int(0.25 n) scores from each end of the sorted x.
    """
    x = np.asarray(scores, dtype=float)  # [n]
    if x.size == 0:
        return float("nan")
    return float(sps.trim_mean(x, 0.25))


def _mean_of_task_means(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """statistic(x_1..x_M) = (1/M) sum_m mean(x_m): the average over tasks of per-task means."""
    return np.mean([np.mean(s, axis=axis) for s in samples], axis=0)


def stratified_bootstrap_ci(
    scores_by_task: Sequence[Sequence[float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
    min_seeds: int = MIN_SEEDS_FOR_CI,
) -> Optional[tuple[float, float]]:
    """95% percentile CI of (1/M) sum_m mean(seeds of task m), resampling seeds within each task.

    Stratified bootstrap: each task (stratum) is resampled independently with replacement, which
    is what scipy.stats.bootstrap does for several unpaired samples. One task = an ordinary
    bootstrap over seeds. Returns None when any task has fewer than `min_seeds` seeds.
    """
    samples = [np.asarray(s, dtype=float) for s in scores_by_task]  # M x [n_m]
    if not samples or min(s.size for s in samples) < min_seeds:
        return None
    res = sps.bootstrap(
        tuple(samples),
        _mean_of_task_means,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        paired=False,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def probability_of_improvement(
    method_by_task: dict[str, Sequence[float]], baseline_by_task: dict[str, Sequence[float]]
) -> float:
    """P(X > Y) (Agarwal et al. 2021), averaged over the tasks both have:

        P_m = 1/(N_m K_m) sum_i sum_j S(x_{m,i}, y_{m,j}),  S(x, y) = 1 if x > y, 1/2 if x = y, else 0
        P   = (1/M) sum_m P_m

    x = the method's seeds on task m, y = the baseline's seeds (every pair of seeds, not paired by
    seed index: the Mann-Whitney U statistic over N_m K_m). NaN when no task has both.
    """
    per_task = []
    for task in sorted(set(method_by_task) & set(baseline_by_task)):
        x = np.asarray(method_by_task[task], dtype=float)[:, None]  # [N, 1]
        y = np.asarray(baseline_by_task[task], dtype=float)[None, :]  # [1, K]
        if x.size == 0 or y.size == 0:
            continue
        s = (x > y).astype(float) + 0.5 * (x == y)  # [N, K]
        per_task.append(float(s.mean()))
    return float(np.mean(per_task)) if per_task else float("nan")


def change_vs_baseline(mean: float, baseline_mean: float, *, min_baseline: float = 10.0) -> tuple[float, Optional[float]]:
    """(delta, relative): delta = mean - baseline (points); relative = delta / baseline (a
    fraction) only where baseline >= min_baseline points, else None (a tiny baseline makes it
    explode: 5.51 -> -0.23 would read as -104%)."""
    delta = mean - baseline_mean
    relative = delta / baseline_mean if baseline_mean >= min_baseline else None
    return delta, relative
