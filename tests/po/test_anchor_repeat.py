"""The anchor-repeat statistic of GiGPO's step groups (arena.po.advantages_gigpo.anchor_repeat_stats)."""
import pytest

from arena.po.advantages_gigpo import anchor_repeat_stats
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
