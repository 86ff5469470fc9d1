"""What the bootstrap resample count buys and costs: `python analysis/bench_bootstrap.py`.

For each resample count R: the wall time of one CI call (median of repeats) and how far the
printed bounds move between bootstrap seeds 0..19 (max - min over seeds, points), on tied
3-seed data of the testbed's size: two envs, 3 seeds each, success in points on a 1/256 grid.
The report uses stats.N_RESAMPLES.
"""
import statistics
import sys
import time

import numpy as np

from arena.analysis import stats

ENVS = ([34.77, 34.77, 35.94], [5.08, 5.08, 8.20])  # ties, as 256-episode evals give
BASE = ([34.38, 35.16, 35.94], [4.69, 5.08, 5.47])
CALLS = {
    "Avg mean (stratified)": lambda r, s: stats.stratified_bootstrap_ci(ENVS, n_resamples=r, seed=s),
    "IQM": lambda r, s: stats.iqm_ci(ENVS, n_resamples=r, seed=s),
    "P(improve)": lambda r, s: stats.probability_of_improvement_ci(dict(zip("ab", ENVS)), dict(zip("ab", BASE)),
                                                                   n_resamples=r, seed=s),
}


def main(counts=(2000, 10_000, 50_000)) -> int:
    print("| statistic | resamples | ms per call | bound spread over 20 bootstrap seeds |\n|---|---|---|---|")
    for name, call in CALLS.items():
        for r in counts:
            times, lows, highs = [], [], []
            for seed in range(20):
                t0 = time.perf_counter()
                low, high = call(r, seed)
                times.append(time.perf_counter() - t0)
                lows.append(low)
                highs.append(high)
            spread = max(max(lows) - min(lows), max(highs) - min(highs))
            print(f"| {name} | {r} | {1000 * statistics.median(times):.1f} | {spread:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
