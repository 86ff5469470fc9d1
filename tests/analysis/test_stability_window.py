"""The stability fields the report reads (arena.runs.stability): an empty final window."""
from arena.runs.stability import UNRESOLVED, stability


def test_empty_window_with_min_points_zero_is_unresolved():
    # T = 10: the window is step >= 8; the only eval point is step 0 -> window empty. With
    # min_points = 0 the old code compared None < theta (TypeError) and no summary.json was written.
    out = stability([(0, 0.25)], 10, theta=0.0025, min_points=0, n_eval=256)
    assert (out["stable"], out["var_last20"], out["window_points"]) == (UNRESOLVED, None, 0)
    # one point in the window and min_points 0 or 1: population variance 0 < theta -> stable
    assert stability([(0, 0.25), (9, 0.5)], 10, theta=0.0025, min_points=0, n_eval=256)["stable"] is True
