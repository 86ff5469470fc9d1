"""GiGPO (docs/methods.md §4.2, docs/design.md §D): step returns, anchor groups, both modes."""
import math

import pytest
import torch

from arena.po.advantages_gigpo import anchor_groups, gigpo, step_advantage, step_returns
from arena.po.types import make_batch

EPS = 1e-6


def _group():
    """One group, three trajectories, penalty 0.5 on invalid turns, float64.

    row  traj turn obs  reward valid  episode_return  score
     0    0    0   s0    0     yes        10           10
     1    0    1   s1    0     no         10            9.5
     2    0    2   s2   10     yes        10           10
     3    1    0   s0    0     yes         0            0
     4    1    1   s1    0     yes         0            0
     5    1    2   s3    0     yes         0            0
     6    2    1   s2   10     yes        10           10     (rows of traj 2 out of turn order)
     7    2    0   s0    0     no         10            9.5
    """
    valid = [True, False, True, True, True, True, True, False]
    return make_batch(
        group_id=[0] * 8,
        traj_id=[0, 0, 0, 1, 1, 1, 2, 2],
        turn_idx=[0, 1, 2, 0, 1, 2, 1, 0],
        anchor_obs=["s0", "s1", "s2", "s0", "s1", "s3", "s2", "s0"],
        turn_reward=[0, 0, 10, 0, 0, 0, 10, 0],
        episode_return=[10, 10, 10, 0, 0, 0, 10, 10],
        score=[10, 9.5, 10, 0, 0, 0, 10, 9.5],
        format_valid=valid,
        action_valid=valid,
        won=[True, True, True, False, False, False, True, True],
        float64=True,
    )


# Step returns with gamma = 0.5 (G_k = rho_k + gamma G_{k+1}), minus the own-turn penalty
# (episode_return - score), undiscounted:
#   traj 0: G = [0.25*10, 0.5*10, 10] = [2.5, 5, 10]; penalty on turn 1 -> [2.5, 4.5, 10]
#   traj 1: [0, 0, 0]
#   traj 2: turn 0: 0.5*10 = 5 minus 0.5 -> 4.5; turn 1: 10   (rows 6, 7 = turns 1, 0)
RETURNS = [2.5, 4.5, 10.0, 0.0, 0.0, 0.0, 10.0, 4.5]
# Anchor groups: s0 = rows {0, 3, 7}, s1 = {1, 4}, s2 = {2, 6}, s3 = {5} (singleton).
#   s0 values [2.5, 0, 4.5]: mean 7/3, deviations [1/6, -7/3, 13/6]
#   s1 values [4.5, 0]:      mean 2.25, deviations [2.25, -2.25]
#   s2 values [10, 10]:      deviations 0;   s3: singleton -> 0
STEP_MEAN_NORM = [1 / 6, 2.25, 0.0, -7 / 3, -2.25, 0.0, 0.0, 13 / 6]
#   s0 unbiased var = ((1/6)^2 + (7/3)^2 + (13/6)^2) / 2 = (1 + 196 + 169) / 72 = 366/72
#   s1 unbiased var = 2 * 2.25^2 / 1 = 10.125;  s2 std 0 -> 0 / eps = 0
S0, S1 = math.sqrt(366 / 72) + EPS, math.sqrt(10.125) + EPS
STEP_MEAN_STD = [(1 / 6) / S0, 2.25 / S1, 0.0, (-7 / 3) / S0, -2.25 / S1, 0.0, 0.0, (13 / 6) / S0]
# Episode term on the 8 pooled scores [10, 9.5, 10, 0, 0, 0, 10, 9.5]: mu = 49/8 = 6.125,
#   squared deviations 3 * 3.875^2 + 2 * 3.375^2 + 3 * 6.125^2 = 45.046875 + 22.78125 + 112.546875
#   = 180.375, unbiased var = 180.375 / 7.
SCORES = [10, 9.5, 10, 0, 0, 0, 10, 9.5]
EPISODE_MEAN_NORM = [s - 6.125 for s in SCORES]
EPISODE_MEAN_STD = [(s - 6.125) / (math.sqrt(180.375 / 7) + EPS) for s in SCORES]


def test_step_returns_with_gamma_and_penalty():
    assert step_returns(_group(), gamma=0.5).tolist() == pytest.approx(RETURNS, abs=1e-12)


def test_step_returns_default_gamma():
    # traj 0 rewards [0, 0, 10], gamma 0.95: G = [0.95^2 * 10, 0.95 * 10, 10] = [9.025, 9.5, 10],
    # minus 0.5 on turn 1 -> [9.025, 9.0, 10].
    assert step_returns(_group())[:3].tolist() == pytest.approx([9.025, 9.0, 10.0], abs=1e-12)


def test_anchor_groups_exact_match_within_group_id():
    b = _group()
    assert anchor_groups(b).tolist() == [0, 1, 2, 0, 1, 3, 2, 0]
    # the same observation in another task group is a different anchor state
    b.group_id = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1])
    assert anchor_groups(b).tolist() == [0, 1, 2, 0, 1, 3, 4, 5]


def test_step_advantage_both_modes():
    returns = torch.tensor(RETURNS, dtype=torch.float64)
    groups = anchor_groups(_group())
    assert step_advantage(returns, groups, mode="mean_norm").tolist() == pytest.approx(STEP_MEAN_NORM, abs=1e-12)
    got = step_advantage(returns, groups, mode="mean_std_norm").tolist()
    assert got == pytest.approx(STEP_MEAN_STD, abs=1e-12)


def test_gigpo_mean_norm():
    # A = A^E + w A^S with w = 1, then w = 0.5
    expected = [e + s for e, s in zip(EPISODE_MEAN_NORM, STEP_MEAN_NORM)]
    assert gigpo(_group(), gamma=0.5, mode="mean_norm").tolist() == pytest.approx(expected, abs=1e-12)
    expected = [e + 0.5 * s for e, s in zip(EPISODE_MEAN_NORM, STEP_MEAN_NORM)]
    got = gigpo(_group(), gamma=0.5, mode="mean_norm", step_w=0.5).tolist()
    assert got == pytest.approx(expected, abs=1e-12)


def test_gigpo_mean_std_norm_is_default_mode():
    expected = [e + s for e, s in zip(EPISODE_MEAN_STD, STEP_MEAN_STD)]
    assert gigpo(_group(), gamma=0.5).tolist() == pytest.approx(expected, abs=1e-12)


def test_gigpo_per_trajectory_episode_term():
    # per-trajectory means: traj 0 = 29.5/3, traj 1 = 0, traj 2 = 19.5/2 = 9.75;
    # mu = (29.5/3 + 9.75) / 3 = 58.75/9; rows use their own score; mean_norm: A^E = score - mu.
    mu = 58.75 / 9
    expected = [s - mu + st for s, st in zip(SCORES, STEP_MEAN_NORM)]
    got = gigpo(_group(), gamma=0.5, mode="mean_norm", group_stats="per_trajectory").tolist()
    assert got == pytest.approx(expected, abs=1e-12)


def test_gigpo_bad_mode():
    with pytest.raises(ValueError, match="mean_norm.*mean_std_norm"):
        gigpo(_group(), mode="std")
    with pytest.raises(ValueError, match="pooled_turns"):
        gigpo(_group(), group_stats="foo")
