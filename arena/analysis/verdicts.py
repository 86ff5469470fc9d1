"""The one verdict rule for every comparison arena prints (docs/methods.md, Statistics): gain over
the start, arm vs baseline, any paired difference.

Input: paired per-seed differences d_s in points (arm minus baseline on the same seed, or final
minus start of the same run; with several envs, d_s is the mean over envs of the per-env
differences of seed s, so the seed stays the unit). A family is a set of comparisons that share a
question, e.g. k arms against one baseline; its error is controlled as a whole (Holm).

The rule, at family-wise level ALPHA:
  better / worse   the paired t-test rejects d = 0 after Holm's adjustment (p_adjusted < ALPHA),
                   by the sign of the mean;
  no difference    not rejected AND the simultaneous (Bonferroni, 1 - ALPHA/k) t-interval lies
                   inside (-min_effect, +min_effect): the data rule out a difference that large;
  underpowered     anything else (n < 2 included); seeds_needed says how many seeds would detect
                   min_effect with 80% power at the observed spread.

Error rates (proved in docs/methods.md, checked by simulation in tests/analysis/test_verdicts.py):
  - P(some "better"/"worse" in the family where the true mean difference is 0) <= ALPHA, for any
    n >= 2 (exact under normal d_s; Holm holds under any dependence between the comparisons).
  - P(some "no difference" in the family where the true |difference| >= min_effect) <= ALPHA/2:
    that needs a 1 - ALPHA/k interval to miss its true mean on one side, and a union bound over the
    k intervals gives k * ALPHA/(2k).
A family that is looked at again as seeds are added (seeds=auto) is judged under a group-sequential
bound (`bound=`, arena/analysis/sequential.py): the same rule at each look's spending level.
Which comparisons get verdicts at all: arena/analysis/confirmatory.py; how a collapse regime
qualifies them: arena/analysis/collapse_rule.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np
from scipy import optimize
from scipy import stats as sps

from arena.config.verb_args import MIN_EFFECT

BETTER, WORSE, NO_DIFFERENCE, UNDERPOWERED = "better", "worse", "no difference", "underpowered"
VERDICTS = (BETTER, WORSE, NO_DIFFERENCE, UNDERPOWERED)
ALPHA = 0.05  # family-wise error rate
POWER = 0.80
# MIN_EFFECT (points): the stated difference a "no difference" must rule out (report key may
# override). Defined once in the light argument module, whose --help shows it without numpy.
MAX_SEEDS_NEEDED = 100_000  # seeds_needed search cap (reached only when sd / min_effect is huge)


@dataclass(frozen=True)
class Comparison:
    n: int  # paired seeds
    mean: float  # mean of d (points)
    sd: float  # sample sd of d (ddof=1); nan for n < 2
    low: float  # confidence interval at the family-adjusted level (nan for n < 2)
    high: float
    p: float  # raw two-sided p-value (paired t-test; 1.0 for n < 2)
    p_adjusted: float  # Holm-adjusted within its family (== p for a family of one)
    mde: float  # smallest |true difference| detected with 80% power at this n, this sd
    verdict: str  # one of VERDICTS
    seeds_needed: Optional[int]  # for UNDERPOWERED: about how many seeds would resolve min_effect; else None
    note: str  # one short human sentence ("p=0.03 (Holm, 5 arms)", "n=1: no spread")


def all_tied(mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """True where every d_s is the same value (sd = 0 up to float rounding: sd <= 1e-9 (1 + |mean|))."""
    return np.asarray(sd) <= 1e-9 * (1.0 + np.abs(mean))


def tied_sign_flip_p(n: np.ndarray) -> np.ndarray:
    """2^(1 - n): the exact sign-flip p-value of n equal, nonzero differences.

    Under H0 (d symmetric about 0) each of the 2^n sign patterns of (|d_1|, ..., |d_n|) is equally
    likely; the two-sided statistic |sum_s d_s| reaches its observed maximum on 2 of them (all +,
    all -), so p = 2 / 2^n. (n = 2: 0.5; n = 6: 0.03125, the first n below 0.05.)"""
    return np.power(2.0, 1.0 - np.asarray(n, dtype=float))


def paired_t_test(mean: np.ndarray, sd: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Two-sided one-sample t-test of H0: E[d] = 0, elementwise over arrays of any (broadcast) shape.

        t = mean / (sd / sqrt(n)),   df = n - 1,   p = 2 * P(T_df > |t|)

    All d_s tied (sd = 0; success rates are discrete, so ties happen): t is undefined (0/0 or
    infinite), and the exact sign-flip test takes over: p = 1 if they are all 0, else 2^(1 - n)
    (tied_sign_flip_p). n < 2 gives p = 1 (no test without a spread).
    """
    mean, sd, n = np.broadcast_arrays(np.asarray(mean, float), np.asarray(sd, float), np.asarray(n, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(mean) / (sd / np.sqrt(n))  # [...]
        p = 2.0 * sps.t.sf(t, np.maximum(n - 1, 1))  # [...]
    p = np.where(all_tied(mean, sd), np.where(mean == 0, 1.0, tied_sign_flip_p(n)), p)  # [...]
    return np.where((n < 2) | ~np.isfinite(p), 1.0, p)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values over the last axis (one family per row).

    Sort the k p-values ascending, p_(1) <= ... <= p_(k). Then
        p_adj_(j) = min(1, max_{i <= j} (k - i + 1) p_(i))
    and p_adj < alpha rejects exactly the hypotheses Holm's procedure rejects at level alpha (it
    steps down from the smallest p, testing the j-th at alpha / (k - j + 1), and stops at the
    first non-rejection). It keeps the family-wise error <= alpha under any dependence.
    """
    p = np.asarray(p, dtype=float)  # [..., k]
    k = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")  # [..., k]
    stepped = np.take_along_axis(p, order, axis=-1) * (k - np.arange(k))  # [..., k], (k - j + 1) p_(j)
    adjusted_sorted = np.minimum(np.maximum.accumulate(stepped, axis=-1), 1.0)  # [..., k]
    adjusted = np.empty_like(adjusted_sorted)  # [..., k]
    np.put_along_axis(adjusted, order, adjusted_sorted, axis=-1)
    return adjusted


def _interval_alpha(p: np.ndarray, rejected: np.ndarray, alpha: float) -> np.ndarray:
    """The two-sided level each comparison's interval is drawn at (the family-adjusted level).

    A rejected comparison of Holm rank j (1-based, by ascending p) was tested at alpha / (k - j + 1):
    its interval at that level excludes 0, on the side of the verdict. Every other comparison gets
    the Bonferroni level alpha / k: the k intervals then cover their true means simultaneously with
    probability >= 1 - alpha (union bound), which is what a "no difference" rests on. A non-rejected
    comparison's interval contains 0 (its p >= alpha / k, see holm).
    """
    k = p.shape[-1]
    rank = np.argsort(np.argsort(p, axis=-1, kind="stable"), axis=-1)  # [..., k], 0-based j - 1
    return np.where(rejected, alpha / (k - rank), alpha / max(k, 1))  # [..., k]


def _sequential_holm(p: np.ndarray, n: np.ndarray, alpha: float, bound) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down under a group-sequential bound (sequential.SpendingBound; seeds=auto).

    Member i at n_i seeds is rejected at family level a when its t-test p_i < nominal(n_i, a), the
    bound's level at its look (equivalently its sequential p*_i <= a). Step-down: with m members not
    yet rejected, reject every one with p_i < nominal(n_i, alpha / m); repeat until none is added. This
    is Holm on the p*_i (several crossing at alpha/m would each be rejected in turn, since alpha/m only
    grows as m falls). Error: a false rejection needs a true null crossing its bound at a level
    <= alpha / m0 (m0 true nulls), at some look; each does so with probability <= alpha / m0, so the
    family errs with probability <= alpha (the union bound over the m0), at whatever look it stops.
    Returns (rejected, the level each rejected member was rejected at; alpha / k for the others)."""
    k = p.shape[-1]
    rejected = np.zeros(p.shape, dtype=bool)  # [..., k]
    level = np.full(p.shape, alpha / max(k, 1))  # [..., k]
    for _ in range(k):
        m = np.maximum(k - rejected.sum(axis=-1, keepdims=True), 1)  # [..., 1] members left
        threshold = bound.nominal_array(n, np.broadcast_to(alpha / m, p.shape))  # [..., k]
        new = ~rejected & (p < threshold) & (n >= 2)  # [..., k]
        if not new.any():
            break
        level = np.where(new, np.broadcast_to(alpha / m, p.shape), level)
        rejected |= new
    return rejected, level


def family_verdicts(mean: np.ndarray, sd: np.ndarray, n: np.ndarray, *, min_effect: float = MIN_EFFECT,
                    alpha: float = ALPHA, bound=None) -> dict[str, np.ndarray]:
    """The rule on arrays whose last axis is one family (vectorised: simulations stack on the left).

    Returns p, p_adjusted, low, high and verdict (strings), each shaped like `mean`. The interval:
        mean -/+ t_{1 - a/2, n - 1} * sd / sqrt(n),   a = _interval_alpha(...)
    (all d_s tied: see paired_t_test). With `bound` (a seeds=auto sweep's sequential.SpendingBound)
    the family is judged by _sequential_holm, each interval is drawn at the bound's nominal level for
    its n and family level (a repeated confidence interval: all looks covered at once), and
    p_adjusted is Holm over the sequential p* (sequential.SpendingBound.sequential_p).
    """
    mean, sd, n = np.broadcast_arrays(np.asarray(mean, float), np.asarray(sd, float), np.asarray(n, float))
    p = paired_t_test(mean, sd, n)  # [..., k]
    if bound is None:
        p_adjusted = holm(p)  # [..., k]
        rejected = (p_adjusted < alpha) & (n >= 2)  # [..., k]
        level = _interval_alpha(p, rejected, alpha)  # [..., k]
    else:
        rejected, family_level = _sequential_holm(p, n, alpha, bound)  # [..., k] each
        level = bound.nominal_array(n, family_level)  # [..., k]
        p_adjusted = holm(bound.sequential_p(p, n)) if p.size else p  # [..., k]
    with np.errstate(invalid="ignore", divide="ignore"):
        half = sps.t.ppf(1 - level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)  # [..., k]
    # All tied: the sign-flip interval (the shifts delta the test at `level` does not reject) is
    # {mean} when 2^(1-n) < level, else the whole line.
    tied_half = np.where(tied_sign_flip_p(n) < level, 0.0, np.inf)  # [..., k]
    half = np.where(n >= 2, np.where(all_tied(mean, sd), tied_half, half), np.nan)  # [..., k]
    low, high = mean - half, mean + half  # [..., k]
    equivalent = ~rejected & (n >= 2) & (low > -min_effect) & (high < min_effect)  # [..., k]
    verdict = np.where(rejected, np.where(mean > 0, BETTER, WORSE), np.where(equivalent, NO_DIFFERENCE, UNDERPOWERED))
    return dict(p=p, p_adjusted=p_adjusted, low=low, high=high, verdict=verdict)


def verdicts_of_samples(diffs: np.ndarray, *, min_effect: float = MIN_EFFECT, alpha: float = ALPHA) -> np.ndarray:
    """Verdict strings for stacked families of samples: diffs [..., k, n] -> verdicts [..., k].

    The fast path the simulations use; compare_family gives the same verdicts one family at a time.
    """
    d = np.asarray(diffs, dtype=float)  # [..., k, n]
    n = d.shape[-1]
    sd = np.std(d, axis=-1, ddof=1) if n > 1 else np.full(d.shape[:-1], np.nan)  # [..., k]
    return family_verdicts(d.mean(axis=-1), sd, np.full(d.shape[:-1], n), min_effect=min_effect, alpha=alpha)["verdict"]


def _power(noncentrality: float, df: int, critical: float) -> float:
    """P(|T'| > c), T' ~ noncentral t(df, noncentrality): the two-sided t-test's power.

    The far tail P(T' < -c) is below 1e-8 once the power nears 0.8 (lambda > 0), and scipy's nct.cdf
    returns NaN there for some (df, lambda): a NaN counts as 0."""
    wrong_side = float(np.nan_to_num(sps.nct.cdf(-critical, df, noncentrality), nan=0.0))
    return float(sps.nct.sf(critical, df, noncentrality)) + wrong_side


def detectable_difference(sd: float, n: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE: the smallest |true mean difference| a two-sided paired t-test at level alpha detects
    with probability `power`, at n seeds and spread sd (the observed sd plugged in for sigma).

    Under a true difference delta, t = mean / (sd / sqrt(n)) ~ noncentral t(n - 1, lambda) with
    lambda = delta sqrt(n) / sigma. Solve power(lambda) = P(|T'| > t_{1-alpha/2, n-1}) = power for
    lambda* (brentq; power rises with lambda), then MDE = lambda* sigma / sqrt(n). Large-n check:
    lambda* -> z_{1-alpha/2} + z_power = 1.96 + 0.84 = 2.80 at alpha 0.05, power 0.8.
    NaN for n < 2 (no spread, no test). sd = 0 (all d_s tied, the sign-flip test of paired_t_test):
    0 when 2^(1-n) < alpha (any constant shift is detected), else inf (none is).
    """
    if n < 2 or not math.isfinite(sd):
        return float("nan")
    if sd == 0:
        return 0.0 if float(tied_sign_flip_p(n)) < alpha else float("inf")
    df = n - 1
    critical = float(sps.t.ppf(1 - alpha / 2, df))
    upper = critical + 10.0
    while _power(upper, df, critical) < power:
        upper *= 2
    noncentrality = optimize.brentq(lambda nc: _power(nc, df, critical) - power, 0.0, upper, xtol=1e-10)
    return float(noncentrality * sd / math.sqrt(n))


def seeds_to_detect(sd: float, min_effect: float, *, alpha: float = ALPHA, power: float = POWER) -> Optional[int]:
    """The smallest n with detectable_difference(sd, n) <= min_effect (MDE falls with n).

    Starts from the normal-theory guess n0 = ((z_{1-alpha/2} + z_power) sd / min_effect)^2, a lower
    bound (the t quantiles exceed the normal ones), and steps up. None without a finite sd; for
    sd = 0 the smallest n with 2^(1-n) < alpha (6 at alpha 0.05).
    """
    if not math.isfinite(sd):
        return None
    if sd == 0:
        return 1 + math.floor(math.log2(1 / alpha)) + 1
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    n = max(2, math.floor((z * sd / min_effect) ** 2))
    while n < MAX_SEEDS_NEEDED and detectable_difference(sd, n, alpha=alpha, power=power) > min_effect:
        n += 1 if n < 64 else max(1, n // 64)
    return n


def _summary(d: Sequence[float]) -> tuple[int, float, float]:
    """(n, mean, sd) of the finite values of d (a seed without a score is not a pair)."""
    x = np.asarray(d, dtype=float)  # [n_given]
    x = x[np.isfinite(x)]  # [n]
    mean = float(x.mean()) if x.size else float("nan")
    return int(x.size), mean, float(np.std(x, ddof=1)) if x.size > 1 else float("nan")


def _note(n: int, p_adjusted: float, k: int, verdict: str, mde: float, seeds_needed: Optional[int],
          min_effect: float) -> str:
    if n < 2:
        return f"n={n}: no spread, no test"
    family = f"Holm, {k} arms" if k > 1 else "t-test"
    text = f"p={p_adjusted:.3g} ({family}); detects {mde:.1f}"
    if verdict == UNDERPOWERED and seeds_needed is not None:
        text += f"; ~{seeds_needed} seeds to detect {min_effect:g}"
    return text


def compare_family(diffs_by_name: Mapping[str, Sequence[float]], *, min_effect: float = MIN_EFFECT,
                   alpha: float = ALPHA, bound=None) -> dict[str, Comparison]:
    """The rule for a family of paired comparisons (Holm across the family), by name.

    The family is the members with at least 2 finite pairs: one with fewer has no test (verdict
    underpowered, p = p_adjusted = 1) and does not count in k, so it cannot dilute the others
    (which members count depends on the seed counts alone, never on the outcomes).
    mde and seeds_needed use the Bonferroni level alpha / k, the level the family guarantees each
    comparison (Holm tests the last-ranked one there; earlier ones get more)."""
    summaries = {name: _summary(diffs_by_name[name]) for name in diffs_by_name}
    tested = [name for name, (n, _, _) in summaries.items() if n >= 2]
    k = max(1, len(tested))
    order = tested + [name for name in summaries if name not in tested]
    if not order:
        return {}
    n, mean, sd = (np.array(col, dtype=float) for col in zip(*(summaries[name] for name in order)))  # [members] each
    t = len(tested)
    result = family_verdicts(mean[:t], sd[:t], n[:t], min_effect=min_effect, alpha=alpha, bound=bound)  # [t] each
    untested = {"p": 1.0, "p_adjusted": 1.0, "low": np.nan, "high": np.nan, "verdict": UNDERPOWERED}
    result = {key: np.concatenate([value, np.full(len(order) - t, untested[key])]) for key, value in result.items()}
    out = {}
    for i, name in enumerate(order):
        n_i, verdict = int(n[i]), str(result["verdict"][i])
        spread = 0.0 if bool(all_tied(mean[i], sd[i])) else float(sd[i])  # tied: the sign-flip case
        # the level the family guarantees this member: alpha / k, or under a sequential bound its
        # nominal level at this n (at the last look's level for the seeds still to come)
        member_alpha = alpha / k if bound is None else bound.nominal(n_i, alpha / k)
        later_alpha = alpha / k if bound is None else bound.nominal(bound.max_seeds, alpha / k)
        mde = detectable_difference(spread, n_i, alpha=member_alpha)
        needed = None
        if verdict == UNDERPOWERED and n_i >= 2:
            needed = max(n_i + 1, seeds_to_detect(spread, min_effect, alpha=later_alpha) or 0)
        out[name] = Comparison(
            n=n_i, mean=float(mean[i]), sd=float(sd[i]), low=float(result["low"][i]), high=float(result["high"][i]),
            p=float(result["p"][i]), p_adjusted=float(result["p_adjusted"][i]), mde=mde, verdict=verdict,
            seeds_needed=needed, note=_note(n_i, float(result["p_adjusted"][i]), k, verdict, mde, needed, min_effect))
    return {name: out[name] for name in diffs_by_name}


def compare(diffs: Sequence[float], *, min_effect: float = MIN_EFFECT, alpha: float = ALPHA) -> Comparison:
    """The rule for one paired comparison (a family of one: p_adjusted == p, a 1 - alpha interval)."""
    return compare_family({"d": diffs}, min_effect=min_effect, alpha=alpha)["d"]
