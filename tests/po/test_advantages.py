"""GRPO advantage, the registry and broadcast (docs/methods.md §4.1, docs/design.md §A)."""
import inspect
import math

import pytest
import torch

from arena.po.advantages import ADV, broadcast, get_advantage, grpo
from arena.po.types import make_batch

EPS = 1e-6


def _batch():
    """Three groups, float64 so the hand values are exact.

    group 0: traj 0 has 3 turns, episode_return 1, turn 1 invalid (penalty 0.5): scores 1, 0.5, 1
             traj 1 has 1 turn, episode_return 0, invalid:                     score -0.5
    group 1: traj 2, a single turn, score 3
    group 2: traj 3, two turns, episode_return 2, turn 1 invalid: scores 2, 1.5
    """
    score = [1.0, 0.5, 1.0, -0.5, 3.0, 2.0, 1.5]
    ret = [1.0, 1.0, 1.0, 0.0, 3.0, 2.0, 2.0]
    valid = [True, False, True, False, True, True, False]
    return make_batch(
        group_id=[0, 0, 0, 0, 1, 2, 2],
        traj_id=[0, 0, 0, 1, 2, 3, 3],
        turn_idx=[0, 1, 2, 0, 0, 0, 1],
        turn_reward=[0.0, 0.0, 1.0, 0.0, 3.0, 0.0, 2.0],
        episode_return=ret,
        score=score,
        format_valid=valid,
        action_valid=valid,
        won=[True, True, True, False, True, True, True],
        float64=True,
    )


def test_registry_names_and_signature():
    assert set(ADV) == {"grpo", "gigpo", "empg"}
    for fn in ADV.values():
        params = list(inspect.signature(fn).parameters.values())
        assert params[0].name == "batch"
        assert all(p.kind == p.KEYWORD_ONLY and p.default is not p.empty for p in params[1:])
    assert get_advantage("gigpo") is ADV["gigpo"]
    with pytest.raises(ValueError, match="unknown advantage .ppo.; valid: empg, gigpo, grpo"):
        get_advantage("ppo")


def test_grpo_pooled_turns():
    # group 0 pools the 4 rows [1, 0.5, 1, -0.5]: mu = 2/4 = 0.5, deviations [0.5, 0, 0.5, -1],
    #   unbiased var = (0.25 + 0 + 0.25 + 1) / 3 = 0.5, sigma = sqrt(0.5).
    # group 1 has one element: mu = 0, sigma = 1 -> A = 3 / (1 + eps).
    # group 2 pools [2, 1.5]: mu = 1.75, var = 2 * 0.25^2 / 1 = 0.125 -> A = +-0.25 / (sqrt(0.125) + eps).
    s0, s2 = math.sqrt(0.5) + EPS, math.sqrt(0.125) + EPS
    expected = [0.5 / s0, 0.0, 0.5 / s0, -1.0 / s0, 3.0 / (1 + EPS), 0.25 / s2, -0.25 / s2]
    adv = grpo(_batch())
    assert adv.dtype == torch.float64
    assert adv.tolist() == pytest.approx(expected, abs=1e-12)


def test_grpo_per_trajectory():
    # group 0: traj 0 contributes its mean (1 + 0.5 + 1) / 3 = 5/6, traj 1 contributes -1/2;
    #   mu = (5/6 - 1/2) / 2 = 1/6; deviations +-2/3; unbiased var = 2 * (2/3)^2 / 1 = 8/9,
    #   sigma = sqrt(8/9). Every row uses its own score: (1 - 1/6) = 5/6, (0.5 - 1/6) = 1/3, -2/3.
    # group 1: one trajectory -> mu 0, sigma 1 -> 3 / (1 + eps).
    # group 2: one trajectory (two turns) -> one element -> mu 0, sigma 1 -> [2, 1.5] / (1 + eps).
    s0 = math.sqrt(8 / 9) + EPS
    expected = [(5 / 6) / s0, (1 / 3) / s0, (5 / 6) / s0, (-2 / 3) / s0, 3 / (1 + EPS), 2 / (1 + EPS), 1.5 / (1 + EPS)]
    assert grpo(_batch(), group_stats="per_trajectory").tolist() == pytest.approx(expected, abs=1e-12)


def test_grpo_without_std():
    # norm_std=False: A = score - mu with the same mu as above (singletons: mu = 0).
    pooled = [0.5, 0.0, 0.5, -1.0, 3.0, 0.25, -0.25]
    per_traj = [5 / 6, 1 / 3, 5 / 6, -2 / 3, 3.0, 2.0, 1.5]
    assert grpo(_batch(), norm_std=False).tolist() == pytest.approx(pooled, abs=1e-12)
    got = grpo(_batch(), group_stats="per_trajectory", norm_std=False).tolist()
    assert got == pytest.approx(per_traj, abs=1e-12)


def test_grpo_uniform_group_is_zero_and_float32_kept():
    # Two trajectories, equal scores: sigma = 0 -> (s - mu) / (0 + eps) = 0 / eps = 0.
    b = make_batch(
        group_id=[4, 4], traj_id=[0, 1], turn_idx=[0, 0], turn_reward=[0.0, 0.0], episode_return=[0.0, 0.0],
        score=[0.0, 0.0], format_valid=[True, True], action_valid=[True, True], won=[False, False],
    )
    adv = grpo(b)
    assert adv.dtype == torch.float32
    assert adv.tolist() == [0.0, 0.0]


def test_grpo_bad_options():
    with pytest.raises(ValueError, match="pooled_turns.*per_trajectory"):
        grpo(_batch(), group_stats="foo")
    b = _batch()
    b.group_id = torch.tensor([0, 1, 0, 0, 1, 2, 2])  # traj 0 now spans groups 0 and 1
    with pytest.raises(ValueError, match="traj_id"):
        grpo(b)


def test_broadcast():
    # A_{j,t} = A_j * m_{j,t}
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert broadcast(adv, mask).tolist() == [[2.0, 2.0, 0.0], [-1.0, -0.0, -0.0]]
    with pytest.raises(ValueError, match=r"\[N\]"):
        broadcast(adv, mask[:1])
