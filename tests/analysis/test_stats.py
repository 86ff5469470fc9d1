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
    direct = sps.bootstrap((x,), np.mean, n_resamples=2000, confidence_level=0.95, method="percentile",
                           rng=np.random.default_rng(0))
    low, high = stats.stratified_bootstrap_ci([x])
    assert low == pytest.approx(direct.confidence_interval.low, rel=1e-12)
    assert high == pytest.approx(direct.confidence_interval.high, rel=1e-12)


def test_stratified_bootstrap_matches_direct_scipy_call():
    a, b = np.array([40.0, 50.0, 60.0]), np.array([5.0, 5.0, 8.0, 9.0])

    def mean_of_means(x, y, axis=-1):  # (mean(a*) + mean(b*)) / 2, each env resampled on its own
        return (np.mean(x, axis=axis) + np.mean(y, axis=axis)) / 2

    direct = sps.bootstrap((a, b), mean_of_means, n_resamples=2000, method="percentile", paired=False,
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


def test_relative_change_only_above_ten_points():
    assert stats.change_vs_baseline(65.0, 50.0) == (15.0, 0.3)
    # the paper's Sokoban case: 5.51 -> -0.23 is a -5.74 point change, no relative number
    delta, rel = stats.change_vs_baseline(-0.23, 5.51)
    assert delta == pytest.approx(-5.74, abs=1e-12) and rel is None
