"""Statistics for the report tables (Agarwal et al. 2021, "Deep RL at the edge of the statistical
precipice"; formulas in docs/methods.md, Statistics). Pure functions on plain arrays of scores;
the bootstraps are scipy.stats.bootstrap (percentile method), no `rliable` (it fails to import
beside pandas 3).

Scores are success rates; the caller decides the unit (the report uses points, x100).

These intervals describe the scores; no verdict comes from them. Every better / worse / no
difference arena prints follows the one rule in arena/analysis/verdicts.py (a percentile bootstrap
over a handful of seeds undercovers: see percentile_ci_coverage_note).

Resample count: the percentile bounds are Monte-Carlo estimates, so every CI uses N_RESAMPLES =
50,000. `python analysis/bench_bootstrap.py` measures what that buys and costs; on the 2-core
development machine under load, 2 envs x 3 tied seeds: at 2000 resamples the bounds moved by
up to 0.13 points (Avg mean) and 0.028 (P) between bootstrap seeds, at 50,000 by 0; one call
took 20-50 ms at 50,000 against under 1 ms at 2000 (a 13-arm report makes about 65 calls).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
from scipy import stats as sps

N_RESAMPLES = 50_000  # bootstrap resamples per CI
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


def _pooled_iqm(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """statistic(x_1..x_M) = IQM of the pooled scores (x_1, ..., x_M) (resampled within each task)."""
    pooled = np.concatenate([np.moveaxis(s, axis, -1) for s in samples], axis=-1)  # [..., sum_m n_m]
    return sps.trim_mean(pooled, 0.25, axis=-1)


def _percentile_ci(samples: Sequence[np.ndarray], statistic: Callable, *, n_resamples: int, seed: int,
                   confidence: float) -> tuple[float, float]:
    """Percentile CI of statistic(samples), each sample (stratum) resampled on its own with
    replacement: scipy.stats.bootstrap with several unpaired samples is the stratified bootstrap."""
    res = sps.bootstrap(tuple(samples), statistic, n_resamples=n_resamples, confidence_level=confidence,
                        method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _enough(samples: Sequence[np.ndarray], min_seeds: int) -> bool:
    return bool(samples) and min(s.size for s in samples) >= min_seeds


def stratified_bootstrap_ci(
    scores_by_task: Sequence[Sequence[float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
    min_seeds: int = MIN_SEEDS_FOR_CI,
) -> Optional[tuple[float, float]]:
    """95% percentile CI of (1/M) sum_m mean(seeds of task m), resampling seeds within each task.

    One task = an ordinary bootstrap over seeds. Returns None when any task has fewer than
    `min_seeds` seeds.
    """
    samples = [np.asarray(s, dtype=float) for s in scores_by_task]  # M x [n_m]
    if not _enough(samples, min_seeds):
        return None
    return _percentile_ci(samples, _mean_of_task_means, n_resamples=n_resamples, seed=seed, confidence=confidence)


def paired_differences_by_seed(method_by_seed: dict[int, float], baseline_by_seed: dict[int, float]) -> dict[int, float]:
    """seed -> d_s = x_s - y_s, for every seed s that both have a finite score for (seed order).

    The same seed means the same BC start and the same eval rooms, so d_s removes what the two
    runs share; the paired comparison (arena/analysis/verdicts.py) is a statistic of d alone.
    """
    seeds = sorted(s for s in set(method_by_seed) & set(baseline_by_seed)
                   if np.isfinite(method_by_seed[s]) and np.isfinite(baseline_by_seed[s]))
    return {s: float(method_by_seed[s] - baseline_by_seed[s]) for s in seeds}


def paired_differences(method_by_seed: dict[int, float], baseline_by_seed: dict[int, float]) -> np.ndarray:
    """The d_s of paired_differences_by_seed as an array, in seed order."""
    return np.array(list(paired_differences_by_seed(method_by_seed, baseline_by_seed).values()), dtype=float)  # [n_pairs]


def iqm_ci(scores_by_task: Sequence[Sequence[float]], *, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
           confidence: float = CONFIDENCE, min_seeds: int = MIN_SEEDS_FOR_CI) -> Optional[tuple[float, float]]:
    """95% stratified percentile CI of the IQM of the pooled (task, seed) scores."""
    samples = [np.asarray(s, dtype=float) for s in scores_by_task]  # M x [n_m]
    if not _enough(samples, min_seeds):
        return None
    return _percentile_ci(samples, _pooled_iqm, n_resamples=n_resamples, seed=seed, confidence=confidence)


def _improvement(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """samples = (x_1..x_M, y_1..y_M): (1/M) sum_m P(x_m > y_m) (probability_of_improvement)."""
    m = len(samples) // 2
    per_task = []
    for x, y in zip(samples[:m], samples[m:]):
        x = np.moveaxis(x, axis, -1)[..., :, None]  # [..., N, 1]
        y = np.moveaxis(y, axis, -1)[..., None, :]  # [..., 1, K]
        per_task.append(((x > y) + 0.5 * (x == y)).mean(axis=(-2, -1)))  # [...]
    return np.mean(per_task, axis=0)


def probability_of_improvement(
    method_by_task: dict[str, Sequence[float]], baseline_by_task: dict[str, Sequence[float]]
) -> float:
    """P(X > Y) (Agarwal et al. 2021), averaged over the tasks both have:

        P_m = 1/(N_m K_m) sum_i sum_j S(x_{m,i}, y_{m,j}),  S(x, y) = 1 if x > y, 1/2 if x = y, else 0
        P   = (1/M) sum_m P_m

    x = the method's seeds on task m, y = the baseline's seeds (every pair of seeds, not paired by
    seed index: the Mann-Whitney U statistic over N_m K_m). NaN when no task has both.
    """
    tasks = [t for t in sorted(set(method_by_task) & set(baseline_by_task))
             if len(method_by_task[t]) and len(baseline_by_task[t])]
    if not tasks:
        return float("nan")
    xs = [np.asarray(method_by_task[t], dtype=float) for t in tasks]  # M x [N_m]
    ys = [np.asarray(baseline_by_task[t], dtype=float) for t in tasks]  # M x [K_m]
    return float(_improvement(*xs, *ys))


def probability_of_improvement_ci(
    method_by_task: dict[str, Sequence[float]], baseline_by_task: dict[str, Sequence[float]], *,
    n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED, confidence: float = CONFIDENCE,
    min_seeds: int = MIN_SEEDS_FOR_CI,
) -> Optional[tuple[float, float]]:
    """95% CI of P(X > Y): both arms' seeds resampled within each task (2M strata), as rliable does.
    None when a task of either side has fewer than `min_seeds` seeds, or they share no task."""
    tasks = sorted(set(method_by_task) & set(baseline_by_task))
    xs = [np.asarray(method_by_task[t], dtype=float) for t in tasks]  # M x [N_m]
    ys = [np.asarray(baseline_by_task[t], dtype=float) for t in tasks]  # M x [K_m]
    if not _enough(xs + ys, min_seeds):
        return None
    return _percentile_ci(xs + ys, _improvement, n_resamples=n_resamples, seed=seed, confidence=confidence)


def percentile_ci_coverage_note(n_seeds: int) -> str:
    """What a percentile-bootstrap "95%" interval over n seeds is worth. With n seeds a resample is
    all-min with probability n^-n; for n = 3 that is 1/27 = 3.7% > 2.5%, so the bounds are exactly
    the min and the max of the seeds. [min, max] of n draws covers the median of the seed
    distribution with probability 1 - 2 * 0.5^n (75% for n = 3, 87.5% for n = 4)."""
    if n_seeds < MIN_SEEDS_FOR_CI:
        return f"{n_seeds} seeds: no CI"
    if n_seeds ** -n_seeds > (1 - CONFIDENCE) / 2:
        cover = 100 * (1 - 2 * 0.5 ** n_seeds)
        return (f"{n_seeds} seeds: a percentile-bootstrap \"95%\" CI is the [min, max] of the seeds, which covers "
                f"the seeds' median in only {cover:g}% of repeats")
    return f"{n_seeds} seeds: percentile-bootstrap CIs cover less than 95% at so few seeds"
