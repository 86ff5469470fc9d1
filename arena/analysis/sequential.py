"""A group-sequential bound for tests that look again after every added seed (seeds=auto; docs/methods.md
§14, "Sequential looks"): Lan-DeMets alpha spending with the O'Brien-Fleming-type spending function,
over the fixed look schedule n = first, first + 1, ..., max_seeds.

The canonical model. With n paired seeds and d_s ~ N(delta, sigma^2) i.i.d., the score S_n = sum_{s<=n} d_s
/ sigma is a Gaussian random walk, Z_n = S_n / sqrt(n), and the looks n_1 < ... < n_L have information
fractions t_j = n_j / n_L. Under H0 (delta = 0), Cov(Z_i, Z_j) = sqrt(n_i / n_j) for i < j.

Spending (two-sided, symmetric: alpha/2 per side, each by Lan and DeMets' (1983) O'Brien-Fleming-type
function):
    alpha*(t) = 2 (2 - 2 Phi(z_{1 - alpha/4} / sqrt(t))),   alpha*(1) = alpha, alpha*(t) -> 0 fast as t -> 0.
Boundaries c_1..c_L solve, look by look,
    P(|Z_1| < c_1, ..., |Z_{j-1}| < c_{j-1}, |Z_j| >= c_j) = alpha*(t_j) - alpha*(t_{j-1})
so P(|Z_j| >= c_j at some look) = alpha exactly, whatever look the test stops at (stopping early for any
reason, a "no difference" included, only lowers it). The probabilities come from the recursive
integration of Armitage, McPherson and Rowe (1969) on a grid of S: f_1 = N(0, n_1) density; f_{j+1} =
(f_j restricted to |s| < c_j sqrt(n_j)) convolved with the N(0, n_{j+1} - n_j) density.

The t-test. sigma is unknown and the test at look j is the paired t-test of n_j seeds. The usual
small-sample shortcut, rejecting when the t-test's p < 2 (1 - Phi(c_j)) (Jennison and Turnbull 2000,
§3.8), errs above alpha at 3-10 seeds (5.5-5.8% measured, 200,000 null paths). So the levels are
calibrated on the t-test itself: the same spending alpha*(t), each look's level a_j the one at which
the paths still alive of MC_PATHS simulated null paths (fixed seed) are rejected in the amount
alpha*(t_j) - alpha*(t_{j-1}) (_t_levels). The t statistics' joint law under H0 does not depend on
sigma, so these levels are exact for normal d_s up to Monte Carlo error (about 0.0005 on the total).
`boundaries` (normal theory, deterministic) is the reference the spending is checked against.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy import stats as sps

GRID_STEP = 0.02  # grid spacing of S (in units of sigma); the bounds move < 1e-3 on halving it
GRID_SD = 9.0  # the grid spans +-9 sd of S at the last look


def obf_spent(t: np.ndarray, alpha: float) -> np.ndarray:
    """alpha*(t) = 2 (2 - 2 Phi(z_{1-alpha/4} / sqrt(t))): the two-sided error spent by information fraction
    t, alpha/2 on each side by the O'Brien-Fleming-type function (the symmetric design of gsDesign's sfLDOF
    and ldbounds); alpha*(1) = alpha."""
    t = np.asarray(t, dtype=float)
    return 4.0 - 4.0 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 4) / np.sqrt(t))


def _tail(s: np.ndarray, f: np.ndarray):
    """b -> integral over |s| >= b of the sub-density f on the grid s: the total minus the cumulative
    trapezoid integral F between -b and +b (F linearly interpolated between grid points)."""
    cumulative = np.concatenate([[0.0], np.cumsum((f[1:] + f[:-1]) / 2 * np.diff(s))])  # [G]
    return lambda b: float(cumulative[-1] - (np.interp(b, s, cumulative) - np.interp(-b, s, cumulative)))


@lru_cache(maxsize=4096)
def boundaries(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """The z boundaries c_1..c_L of the O'Brien-Fleming-type spending at two-sided level alpha over the
    looks (seed counts, increasing). One look: c_1 = z_{1 - alpha/2}."""
    n = np.asarray(looks, dtype=float)  # [L]
    if len(n) == 0 or np.any(np.diff(n) <= 0) or n[0] <= 0:
        raise ValueError(f"looks={looks}: valid: increasing positive seed counts")
    spent = obf_spent(n / n[-1], alpha)  # [L], cumulative
    half = GRID_SD * np.sqrt(n[-1])
    s = np.arange(-half, half + GRID_STEP / 2, GRID_STEP)  # [G] grid of S
    f = sps.norm.pdf(s, scale=np.sqrt(n[0]))  # [G] density of S_{n_1}
    out, before = [], 0.0
    for j in range(len(n)):
        if j > 0:  # carry the continuation region to the next look: f * N(0, n_j - n_{j-1})
            width = np.sqrt(n[j] - n[j - 1])
            k = np.arange(-GRID_SD * width, GRID_SD * width + GRID_STEP / 2, GRID_STEP)  # [K]
            kernel = sps.norm.pdf(k, scale=width) * GRID_STEP  # [K]
            f = np.convolve(f, kernel, mode="same")  # [G]
        target = spent[j] - before  # the error this look may spend
        tail = _tail(s, f)
        scale = np.sqrt(n[j])
        if tail(12.0 * scale) >= target:  # nothing to spend at this look (tiny alpha): no rejection here
            c = np.inf
        elif tail(0.0) <= target:  # more to spend than paths left (alpha near 1): every path crosses
            c, before = 0.0, spent[j]
        else:
            c = optimize.brentq(lambda z: tail(z * scale) - target, 0.0, 12.0, xtol=1e-9)
            before = spent[j]
        out.append(float(c))
        f = np.where(np.abs(s) < c * scale, f, 0.0)  # [G] paths that have not crossed
    return tuple(out)


@dataclass(frozen=True)
class SpendingBound:
    """The bound of a seeds=auto sweep: looks at every seed count from `first` to `max_seeds`."""
    first: int
    max_seeds: int

    @property
    def looks(self) -> tuple[int, ...]:
        return tuple(range(self.first, self.max_seeds + 1))

    def nominal(self, n: int, alpha: float) -> float:
        """The t-test's level at n seeds for a comparison with error budget alpha (_t_levels), at the
        look of n (fewer seeds than `first`, e.g. a failed seed: the first look's; more than
        max_seeds: the last look's)."""
        return _nominal(self.looks, int(min(max(n, self.first), self.max_seeds)), float(alpha))

    def nominal_array(self, n: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """nominal over broadcast arrays of seed counts and levels (the simulations' vectorised form)."""
        n, alpha = np.broadcast_arrays(np.asarray(n), np.asarray(alpha, dtype=float))
        pairs = {(int(a), float(b)) for a, b in zip(n.ravel(), alpha.ravel())}
        table = {key: self.nominal(*key) for key in pairs}
        return np.array([table[(int(a), float(b))] for a, b in zip(n.ravel(), alpha.ravel())]).reshape(n.shape)

    def sequential_p(self, p: np.ndarray, n: np.ndarray) -> np.ndarray:
        """p* = the smallest family level a at which the t-test's p at n seeds crosses the bound
        (p <= nominal(n, a)); p* <= a is the rejection at level a, so Holm over the p* of a family is
        the step-down verdicts.family_verdicts runs (which decides on the exact levels; p* is for
        display): interpolated in log a between P_STAR_GRID levels (nominal rises with a)."""
        log_a, log_nominal = _p_star_table(self.looks)  # [A], [L, A]
        p, n = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(n))
        look = np.clip(n.astype(int), self.first, self.max_seeds) - self.first  # [...]
        log_p = np.log(np.clip(p, 1e-300, 1.0))  # [...]
        out = np.array([np.interp(lp, log_nominal[j], log_a) for lp, j in zip(log_p.ravel(), look.ravel())])
        return np.where(p >= 1.0, 1.0, np.exp(out).reshape(p.shape))

    def describe(self) -> str:
        return (f"group-sequential (Lan-DeMets O'Brien-Fleming spending over the looks at {self.first}-{self.max_seeds} "
                f"seeds; nominal two-sided level at the last look {self.nominal(self.max_seeds, 0.05):.4f}, at the "
                f"first {self.nominal(self.first, 0.05):.2g}, for a family of one at 0.05)")


def judging_level(record) -> dict:
    """How a sweep's verdicts are judged, from its manifest's `auto_seeds` record, as keyword arguments
    of verdicts.compare_family: {"bound": SpendingBound} for a seeds=auto sweep; {"alpha": its per-look
    level} for an older arena's record (Bonferroni over the looks, no bound); {} for fixed seeds."""
    if not isinstance(record, dict) or not record:
        return {}
    try:
        if record.get("bound"):
            return {"bound": SpendingBound(int(record["first_seeds"]), int(record["max_seeds"]))}
        return {"alpha": float(record["alpha"])} if "alpha" in record else {}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the manifest's auto_seeds record {record!r} is malformed ({exc!r}); valid: a `bound` "
                         "with integer first_seeds and max_seeds, or a numeric per-look `alpha`") from None


P_STAR_GRID = np.geomspace(1e-6, 1.0, 61)  # family levels a at which p* is tabulated (6 decades, 10 a decade)


@lru_cache(maxsize=64)
def _p_star_table(looks: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(log a [A], log nominal(n, a) [L, A]) for the looks, strictly rising in a (for np.interp)."""
    nominal = np.array([_t_levels(looks, float(a)) for a in P_STAR_GRID]).T  # [L, A]
    log_nominal = np.log(np.clip(nominal, 1e-300, 1.0))  # [L, A]
    log_nominal = np.maximum.accumulate(log_nominal + 1e-12 * np.arange(len(P_STAR_GRID)), axis=1)  # [L, A]
    return np.log(P_STAR_GRID), log_nominal


def _nominal(looks: tuple[int, ...], n: int, alpha: float) -> float:
    return _t_levels(looks, alpha)[looks.index(n)]


MC_PATHS = 200_000  # null paths the t-test levels are calibrated on (the spent error is exact to ~0.0005)
MC_SEED = 56  # fixed: every machine computes the same bound


@lru_cache(maxsize=8)
def _null_p(looks: tuple[int, ...]) -> np.ndarray:
    """The two-sided paired t-test p of MC_PATHS null paths at each look: d_s ~ N(0, 1) i.i.d. (the
    t statistics' joint law does not depend on sigma), p_{i,j} = 2 P(T_{n_j - 1} > |t_{i,j}|). [N, L]"""
    rng = np.random.default_rng(MC_SEED)
    d = rng.standard_normal((MC_PATHS, looks[-1]))  # [N, M]
    n = np.asarray(looks)  # [L]
    total = np.cumsum(d, axis=1)[:, n - 1]  # [N, L] sum of the first n_j
    squares = np.cumsum(d * d, axis=1)[:, n - 1]  # [N, L]
    mean = total / n  # [N, L]
    sd = np.sqrt(np.maximum(squares - n * mean * mean, 0.0) / (n - 1))  # [N, L]
    return 2.0 * sps.t.sf(np.abs(mean) / (sd / np.sqrt(n)), n - 1)  # [N, L]


@lru_cache(maxsize=65536)
def _t_levels(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """The t-test's nominal level at each look: the same spending alpha*(t) as `boundaries`, applied to
    the paired t-test's own null paths (the normal-theory boundaries would err above alpha with 2-9
    degrees of freedom: 5.5-5.8% measured at 4-10 seeds). The first look's p is uniform, so
    a_1 = alpha*(t_1) exactly; look j > 1 rejects the paths still alive whose p < a_j, a_j chosen so
    that floor(N alpha*(t_j)) of the N paths are rejected by then (a count, so rounding never spends
    more than alpha*(t_j) in all)."""
    p = _null_p(looks)  # [N, L]
    spent = obf_spent(np.asarray(looks) / looks[-1], alpha)  # [L] cumulative
    alive = np.ones(len(p), dtype=bool)  # [N]
    out, rejected = [], 0
    for j in range(len(looks)):
        live = p[alive, j]  # [alive]
        k = min(int(np.floor(spent[j] * len(p))) - rejected, live.size)  # paths to reject at this look
        if j == 0:  # the first look's p is exactly uniform: its level is alpha*(t_1) itself
            level = float(spent[0])
        elif k <= 0:
            level = float(live.min()) if live.size else 0.0  # "p < level" rejects none
        else:
            part = np.partition(live, [k - 1, min(k, live.size - 1)])
            level = float((part[k - 1] + part[min(k, live.size - 1)]) / 2) if k < live.size else 1.0
        out.append(level)
        alive[alive] = live >= level
        rejected = len(p) - int(alive.sum())
    return tuple(out)
