"""Power of the verdict rule's paired t-test for one member of a Holm family of k, by simulation.

Each of the k members has the same true paired effect d_z (mean / SD of the per-seed differences);
a member is resolved when Holm (family-wise 5%, two-sided) rejects it. This is the arithmetic of a
design: how many seeds per arm a finding needs at a measured effect size (docs/testbed.md, "The
collapse regime": which effects were measured on which seeds).

    python analysis/power_holm.py 1.0 1.4 2.0          # power at n = 3..12 seeds, k = 2
    python analysis/power_holm.py --k 1 1.4
"""
import argparse

import numpy as np
from scipy import stats


def power(dz: float, n: int, k: int = 2, reps: int = 20000, seed: int = 0) -> float:
    """Share of simulated families in which the first member is rejected by Holm at 5%."""
    rng = np.random.default_rng(seed)
    # d[r, j, s]: member j's paired difference on seed s, in SD units: N(d_z, 1)
    d = rng.standard_normal((reps, k, n)) + dz  # [reps, k, n]
    # t = mean / (sd / sqrt n), two-sided p on n - 1 degrees of freedom
    t = d.mean(-1) / (d.std(-1, ddof=1) / np.sqrt(n))  # [reps, k]
    p = 2 * stats.t.sf(np.abs(t), n - 1)  # [reps, k]
    order = np.argsort(p, axis=1)  # [reps, k]
    ps = np.take_along_axis(p, order, axis=1)  # [reps, k], ascending
    # Holm: reject the i-th smallest while every p_(j) <= alpha / (k - j) for j <= i
    steps = np.cumprod(ps <= 0.05 / (k - np.arange(k)), axis=1).astype(bool)  # [reps, k]
    rejected = np.zeros((reps, k), bool)
    np.put_along_axis(rejected, order, steps, axis=1)
    return float(rejected[:, 0].mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dz", nargs="+", type=float)
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    print(f"Holm family of {a.k}, 5%, two-sided; power of one member at n = 3..12 seeds")
    for dz in a.dz:
        print(f"d_z {dz:4.2f}: " + " ".join(f"{n}:{power(dz, n, a.k):.2f}" for n in range(3, 13)))


if __name__ == "__main__":
    main()
