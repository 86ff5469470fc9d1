import math

import numpy as np
import pytest
from scipy import stats as sps

from arena.analysis import stats


def test_mean_std_by_hand():
    # [40, 50, 60]: mean 50; deviations -10, 0, 10 -> sum of squares 200 / (n-1=2) = 100 -> std 10
    assert stats.mean_std([40, 50, 60]) == (50.0, 10.0)
    mean, std = stats.mean_std([7.0])
    assert mean == 7.0 and math.isnan(std)  # one seed: no std, never 0
    assert all(math.isnan(v) for v in stats.mean_std([]))


def test_iqm_by_hand():
    # gspo pooled over (env, seed): [55, 65, 75, 10, 20, 30] -> sorted [10, 20, 30, 55, 65, 75];
    # int(0.25*6) = 1 cut from each end -> mean(20, 30, 55, 65) = 170 / 4 = 42.5
    assert stats.iqm([55, 65, 75, 10, 20, 30]) == 42.5
    # 8 scores 1..8: cut 2 each end -> mean(3, 4, 5, 6) = 4.5
    assert stats.iqm(range(1, 9)) == 4.5


def test_bootstrap_ci_matches_direct_scipy_call():
    x = np.array([40.0, 55.0, 60.0, 72.0, 81.0])
    direct = sps.bootstrap((x,), np.mean, n_resamples=stats.N_RESAMPLES, confidence_level=0.95, method="percentile",
                           rng=np.random.default_rng(0))
    low, high = stats.stratified_bootstrap_ci([x])
    assert low == pytest.approx(direct.confidence_interval.low, rel=1e-12)
    assert high == pytest.approx(direct.confidence_interval.high, rel=1e-12)


def test_stratified_bootstrap_matches_direct_scipy_call():
    a, b = np.array([40.0, 50.0, 60.0]), np.array([5.0, 5.0, 8.0, 9.0])

    def mean_of_means(x, y, axis=-1):  # (mean(a*) + mean(b*)) / 2, each env resampled on its own
        return (np.mean(x, axis=axis) + np.mean(y, axis=axis)) / 2

    direct = sps.bootstrap((a, b), mean_of_means, n_resamples=stats.N_RESAMPLES, method="percentile", paired=False,
                           rng=np.random.default_rng(0))
    low, high = stats.stratified_bootstrap_ci([a, b])
    assert (low, high) == pytest.approx((direct.confidence_interval.low, direct.confidence_interval.high), rel=1e-12)
    assert low < (50 + 6.75) / 2 < high


def test_no_ci_with_fewer_than_three_seeds():
    assert stats.stratified_bootstrap_ci([[1.0, 2.0]]) is None
    assert stats.stratified_bootstrap_ci([[1.0, 2.0, 3.0], [4.0, 5.0]]) is None


def test_probability_of_improvement_by_hand():
    # sokoban: x = [55, 65, 75] vs y = [40, 50, 60]: 55 beats 2, 65 and 75 beat 3 -> 8/9
    # household: x = [10, 20, 30] vs y = [5, 5, 8]: all 9 pairs -> 1;  P = (8/9 + 1) / 2 = 17/18
    p = stats.probability_of_improvement({"sokoban": [55, 65, 75], "household": [10, 20, 30]},
                                         {"sokoban": [40, 50, 60], "household": [5, 5, 8]})
    assert p == pytest.approx(17 / 18, rel=1e-15)
    # ties count 1/2: x = [1, 2] vs y = [2]: S = 0 + 0.5 -> 0.25
    assert stats.probability_of_improvement({"t": [1, 2]}, {"t": [2]}) == 0.25
    assert math.isnan(stats.probability_of_improvement({"a": [1]}, {"b": [1]}))


def test_paired_comparison_by_hand():
    # the same seeds 0, 1, 2: arm [41, 51, 61] vs baseline [40, 50, 60] -> d = [1, 1, 1]
    arm, base = {0: 41.0, 1: 51.0, 2: 61.0}, {0: 40.0, 1: 50.0, 2: 60.0}
    assert stats.paired_differences_by_seed(arm, base) == {0: 1.0, 1: 1.0, 2: 1.0}
    assert list(stats.paired_differences(arm, base)) == [1.0, 1.0, 1.0]
    # unpaired, the same data look like noise: 41 beats 1 of [40, 50, 60], 51 beats 2, 61 beats 3
    # -> P = 6/9; and the unpaired CIs of the two means ([41, 61] and [40, 60]) overlap
    assert stats.probability_of_improvement({"t": [41, 51, 61]}, {"t": [40, 50, 60]}) == pytest.approx(6 / 9, rel=1e-15)
    # only seeds both have, and finite: seed 3 (baseline lacks it) and seed 1 (NaN) drop out
    d = stats.paired_differences_by_seed({0: 5.0, 1: float("nan"), 2: 9.0, 3: 1.0}, {0: 2.0, 1: 1.0, 2: 10.0})
    assert d == {0: 3.0, 2: -1.0}


def test_percentile_ci_with_three_seeds_is_min_max():
    # why no verdict comes from these CIs: n = 3, a resample is all-min with probability
    # (1/3)^3 = 1/27 = 3.7% > 2.5%, so the percentile bounds are exactly min and max:
    # [5, 15, 22] -> [5, 22], whatever the bootstrap seed
    for seed in (0, 1, 7):
        assert stats.stratified_bootstrap_ci([[5.0, 15.0, 22.0]], seed=seed) == (5.0, 22.0)
    # two envs, one constant: [15, 15, 15] and [5, 15, 22] -> (15 + [5, 22]) / 2 = [10, 18.5]
    assert stats.stratified_bootstrap_ci([[15.0] * 3, [5.0, 15.0, 22.0]]) == (10.0, 18.5)
    assert "75%" in stats.percentile_ci_coverage_note(3)  # 1 - 2 * 0.5^3


def test_iqm_and_improvement_cis_match_direct_scipy_calls():
    a, b = np.array([40.0, 50.0, 60.0, 70.0]), np.array([5.0, 5.0, 8.0])

    def pooled_iqm(x, y, axis=-1):  # IQM of the 7 pooled scores, each env resampled on its own
        return sps.trim_mean(np.concatenate([x, y], axis=axis), 0.25, axis=axis)

    direct = sps.bootstrap((a, b), pooled_iqm, n_resamples=stats.N_RESAMPLES, method="percentile",
                           rng=np.random.default_rng(0))
    assert stats.iqm_ci([a, b]) == pytest.approx((direct.confidence_interval.low, direct.confidence_interval.high), rel=1e-12)
    # P(X > Y) CI: x = [1, 2, 3] beats y = [0, 0, 0] in every resample -> [1, 1]
    assert stats.probability_of_improvement_ci({"t": [1, 2, 3]}, {"t": [0, 0, 0]}) == (1.0, 1.0)
    # identical samples: P = 1/2 exactly; the CI holds it
    low, high = stats.probability_of_improvement_ci({"t": [1, 2, 3]}, {"t": [1, 2, 3]})
    assert low < 0.5 < high
    assert stats.probability_of_improvement_ci({"t": [1, 2]}, {"t": [0, 0, 0]}) is None  # n < 3
