"""docs/design.md §E on synthetic curves, with hand-computed variances."""
import pytest

from arena.runs.stability import UNRESOLVED, collapse_reason, eval_steps, run_status, stability


def test_eval_steps_cover_start_freq_and_final_window():
    # T=20, test_freq=5: 0,5,10,15,20 plus every step >= ceil(16) = 16..20
    assert eval_steps(20, 5) == [0, 5, 10, 15, 16, 17, 18, 19, 20]


def test_eval_steps_without_the_final_window_keep_start_freq_and_last_step():
    # T=20, test_freq=5: 0,5,10,15,20 (no 16..19); T=10, test_freq=4: 0,4,8 and the last step 10;
    # test_freq above T: the start and the last step only
    assert eval_steps(20, 5, final_window=False) == [0, 5, 10, 15, 20]
    assert eval_steps(10, 4, final_window=False) == [0, 4, 8, 10]
    assert eval_steps(100, 100000, final_window=False) == [0, 100]


def test_flat_curve_is_stable():
    pts = [(s, 0.40) for s in eval_steps(20, 5)]
    out = stability(pts, 20, theta=0.0025, min_points=5, n_eval=256)
    assert out["var_last20"] == 0.0 and out["stable"] is True and out["window_points"] == 5
    # noise floor p(1-p)/n = 0.4*0.6/256 = 0.0009375
    assert out["noise_floor"] == pytest.approx(0.0009375)


def test_late_collapse_is_unstable():
    # window 16..20 = [0.6, 0.6, 0.1, 0.1, 0.1]: mean 0.3, deviations (.3,.3,-.2,-.2,-.2)
    # population variance = (0.09*2 + 0.04*3)/5 = 0.30/5 = 0.06 > 0.0025
    curve = {16: 0.6, 17: 0.6, 18: 0.1, 19: 0.1, 20: 0.1}
    pts = [(s, curve.get(s, 0.6)) for s in eval_steps(20, 5)]
    out = stability(pts, 20, theta=0.0025, min_points=5, n_eval=256)
    assert out["var_last20"] == pytest.approx(0.06) and out["stable"] is False


def test_too_few_points_is_unresolved():
    out = stability([(0, 0.5), (10, 0.5), (20, 0.5)], 20, theta=0.0025, min_points=5, n_eval=256)
    assert out["window_points"] == 1 and out["stable"] == UNRESOLVED


def test_theta_below_noise_floor_warns():
    # p = 0.5, n = 16: floor = 0.25/16 = 0.015625 > theta 0.0025
    out = stability([(s, 0.5) for s in range(16, 21)], 20, theta=0.0025, min_points=5, n_eval=16)
    assert out["warning"] and "noise floor" in out["warning"]
    assert stability([(s, 0.5) for s in range(16, 21)], 20, theta=0.02, min_points=5, n_eval=16)["warning"] is None


def test_collapse_conditions():
    ok = [{"step": i, "actor/grad_norm": 1.0, "rollout/format_valid_ratio": 0.9, "actor/pg_loss": 0.1} for i in range(1, 6)]
    assert collapse_reason(ok, 10) is None
    assert "non-finite loss" in collapse_reason(ok + [{"step": 6, "actor/pg_loss": "nan"}], 10)
    assert "running median" in collapse_reason(ok + [{"step": 6, "actor/grad_norm": 10.5}], 10)
    assert collapse_reason(ok + [{"step": 6, "actor/grad_norm": 9.9}], 10) is None
    # format < 0.5 only counts after the first 10% of steps (step > 1 for T=10), in a run that had it
    had = [{"step": 0, "eval/format_valid_ratio": 0.9}]
    assert collapse_reason(had + [{"step": 1, "rollout/format_valid_ratio": 0.1}], 10) is None
    assert "format_valid_ratio" in collapse_reason(had + [{"step": 2, "rollout/format_valid_ratio": 0.1}], 10)
    # a run that never had the format (random init) has not collapsed; its status is no_format
    never = [{"step": s, "rollout/format_valid_ratio": 0.1, "eval/format_valid_ratio": 0.2} for s in range(1, 10)]
    assert collapse_reason(never, 10) is None
    assert run_status(never, None) == "no_format"
    assert run_status(ok, None) == "done"
    assert run_status(ok, "x") == "collapsed"
    assert run_status([{"step": 1, "actor/grad_norm": 1.0}], None) == "done"  # no format ratio logged


def test_eval_fall_after_a_real_rise_is_a_collapse():
    # n = 100, s0 = 0.2, best = 0.4: SE = sqrt(0.2*0.8/100 + 0.4*0.6/100) = sqrt(0.0016 + 0.0024)
    # = sqrt(0.004) = 0.0632, 2 SE = 0.126 <= 0.2 = best - s0: a real rise. Half of best = 0.2.
    rows = [{"step": 0, "eval/success_rate": 0.2}, {"step": 10, "eval/success_rate": 0.4}]
    assert collapse_reason(rows + [{"step": 20, "eval/success_rate": 0.21}], 30, n_eval=100) is None
    why = collapse_reason(rows + [{"step": 20, "eval/success_rate": 0.2}], 30, n_eval=100)
    assert why is not None and "half its best" in why and "step 20" in why
    # without n_eval the eval rule is not applied
    assert collapse_reason(rows + [{"step": 20, "eval/success_rate": 0.2}], 30) is None
    # n = 10: SE = sqrt(0.016 + 0.024) = 0.2, 2 SE = 0.4 > 0.2: the rise is noise, a fall is no collapse
    assert collapse_reason(rows + [{"step": 20, "eval/success_rate": 0.1}], 30, n_eval=10) is None
    # the best is taken over earlier points only; a fall right at the start (no rise) is no collapse
    assert collapse_reason([{"step": 0, "eval/success_rate": 0.4}, {"step": 1, "eval/success_rate": 0.1}], 30,
                           n_eval=1000) is None


def test_paired_gain_se_by_hand():
    from arena.runs.summary import paired_gain_se
    # before 1,0,1,0 and after 1,1,1,0: d = 0,1,0,0, mean 1/4; sum (d - 1/4)^2 = 3/16 + 9/16 = 3/4;
    # sd = sqrt((3/4) / 3) = 1/2, SE = (1/2) / sqrt(4) = 1/4. The two-sample SE of 0.5 -> 0.75 is
    # sqrt(0.25/4 + 0.1875/4) = 0.331: the pairing (games 0, 2, 3 unchanged) shrinks it.
    assert paired_gain_se([1, 0, 1, 0], [1, 1, 1, 0]) == pytest.approx(0.25)
    # the same wins before and after: no spread in d, SE 0
    assert paired_gain_se([1, 0, 1], [1, 0, 1]) == 0.0
    # unequal or too few episodes: no paired SE
    assert paired_gain_se([1, 0], [1]) is None and paired_gain_se([1], [0]) is None
