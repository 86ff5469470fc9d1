"""The anchor-repeat statistic of GiGPO's step groups (arena.po.advantages_gigpo.anchor_repeat_stats)."""
import pytest

from arena.po.advantages_gigpo import anchor_repeat_stats, step_term_stats
from arena.po.types import make_batch


def _batch(anchors, group_id, traj_id, turn_idx):
    n = len(anchors)
    return make_batch(group_id=group_id, traj_id=traj_id, turn_idx=turn_idx, turn_reward=[0.0] * n,
                      episode_return=[0.0] * n, score=[0.0] * n, format_valid=[True] * n, action_valid=[True] * n,
                      won=[False] * n, anchor_obs=anchors)


def test_repeat_share_by_hand():
    # group 0: traj 0 sees A, B; traj 1 sees A, C  -> step groups {A: 2 rows, 2 trajs}, {B}, {C}
    # group 1: traj 2 sees A, A (a loop)             -> {A: 2 rows, 1 traj} (a different group's A)
    # rows with |S| >= 2: the two A's of group 0 and the two A's of group 1 = 4 of 7 -> 4/7
    # rows whose S spans >= 2 trajectories: only group 0's A's = 2 of 7; traj 3 alone sees D
    b = _batch(["A", "B", "A", "C", "A", "A", "D"], group_id=[0, 0, 0, 0, 1, 1, 1],
               traj_id=[0, 0, 1, 1, 2, 2, 3], turn_idx=[0, 1, 0, 1, 0, 1, 0])
    stats = anchor_repeat_stats(b)
    assert stats["repeat_frac"] == pytest.approx(4 / 7)
    assert stats["multi_traj_frac"] == pytest.approx(2 / 7)


def test_all_distinct_is_zero_and_all_same_is_one():
    distinct = _batch(["A", "B", "C"], group_id=[0, 0, 0], traj_id=[0, 1, 2], turn_idx=[0, 0, 0])
    assert anchor_repeat_stats(distinct) == {"repeat_frac": 0.0, "multi_traj_frac": 0.0}
    same = _batch(["A", "A", "A"], group_id=[0, 0, 0], traj_id=[0, 1, 2], turn_idx=[0, 0, 0])
    assert anchor_repeat_stats(same) == {"repeat_frac": 1.0, "multi_traj_frac": 1.0}


def test_step_term_stats_by_hand():
    # One group, two trajectories of two turns: traj 0 sees A then B and is rewarded 1 on its
    # last turn; traj 1 sees A then C and gets 0. gamma 0.5, no penalty (episode_return = score).
    # Step returns: traj 0: G = 0 + 0.5 * 1 = 0.5, then 1; traj 1: 0, 0.
    # Anchor groups: {A: rows 0, 2} (G 0.5, 0), {B: row 1}, {C: row 3}; mean_norm:
    #   A^S = [0.25, 0, -0.25, 0]                 (singletons are 0)
    # Episode term, pooled_turns, mean_norm: scores [1, 1, 0, 0], mean 0.5:
    #   A^E = [0.5, 0.5, -0.5, -0.5]
    # nonzero_frac = 2/4; abs_ratio = (0.5/4) / 0.5 = 0.25;
    # corr = sum(A^S A^E) / sqrt(sum A^S^2 * sum A^E^2) = 0.25 / sqrt(0.125 * 1) = 1/sqrt(2)
    # (both terms have mean 0, so no centring is needed by hand).
    b = make_batch(group_id=[0, 0, 0, 0], traj_id=[0, 0, 1, 1], turn_idx=[0, 1, 0, 1],
                   turn_reward=[0.0, 1.0, 0.0, 0.0], episode_return=[1.0, 1.0, 0.0, 0.0],
                   score=[1.0, 1.0, 0.0, 0.0], format_valid=[True] * 4, action_valid=[True] * 4,
                   won=[True, True, False, False], anchor_obs=["A", "B", "A", "C"])
    stats = step_term_stats(b, gamma=0.5, mode="mean_norm")
    assert stats["nonzero_frac"] == pytest.approx(0.5)
    assert stats["abs_ratio"] == pytest.approx(0.25)
    assert stats["corr"] == pytest.approx(2 ** -0.5)


def test_step_term_stats_zero_without_repeats():
    # every anchor distinct -> every step group a singleton -> A^S = 0: nothing to add, corr 0
    b = make_batch(group_id=[0, 0], traj_id=[0, 1], turn_idx=[0, 0], turn_reward=[1.0, 0.0],
                   episode_return=[1.0, 0.0], score=[1.0, 0.0], format_valid=[True] * 2,
                   action_valid=[True] * 2, won=[True, False], anchor_obs=["A", "B"])
    assert step_term_stats(b) == {"nonzero_frac": 0.0, "abs_ratio": 0.0, "corr": 0.0}
