"""EMPG (docs/methods.md §4.3): entropy weights g and f, next-turn bonus pairing, centring."""
import math

import pytest
import torch

from arena.po.advantages_empg import empg, entropy_weights, next_turn_rows
from arena.po.types import make_batch


def _batch(**overrides):
    """One group, two trajectories, rows out of turn order, float64.

    row traj turn score  entropy (masked tokens carry junk)   mask      Hbar
     0   0    1    1     [0, 0, 0]                            [1 1 1]   0
     1   0    0    1     [1, 3, 99]                           [1 1 0]   2
     2   1    0    0     [4, 4, 4]                            [1 1 1]   4
     3   1    1    0     [1, 50, 50]                          [1 0 0]   1
     4   1    2    0     [3, 3, 7]                            [1 1 0]   3
    """
    kw = dict(
        group_id=[0] * 5,
        traj_id=[0, 0, 1, 1, 1],
        turn_idx=[1, 0, 0, 1, 2],
        turn_reward=[1, 0, 0, 0, 0],
        episode_return=[1, 1, 0, 0, 0],
        score=[1, 1, 0, 0, 0],
        format_valid=[True] * 5,
        action_valid=[True] * 5,
        won=[True, True, False, False, False],
        entropy=torch.tensor([[0, 0, 0], [1, 3, 99], [4, 4, 4], [1, 50, 50], [3, 3, 7]], dtype=torch.float64),
        response_mask=torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=torch.float64),
        float64=True,
    )
    kw.update(overrides)
    return make_batch(**kw)


# Hbar = [0, 2, 4, 1, 3]; min 0, max 4 -> Hn = Hbar / (4 + 1e-8)
HN = [h / (4 + 1e-8) for h in (0, 2, 4, 1, 3)]
G_RAW = [math.exp(-h) for h in HN]  # k = 1
G = [x / (sum(G_RAW) / 5 + 1e-8) for x in G_RAW]
F = G_RAW  # k_f = 1: f = exp(-Hn)
# next(j): row 0 (traj 0, turn 1) is its trajectory's last turn -> none; row 1 (turn 0) -> row 0;
# row 2 -> row 3; row 3 -> row 4; row 4 is the last turn -> none.
NEXT = [-1, 0, 3, 4, -1]
BONUS = [0.0, F[0], F[3], F[4], 0.0]


def test_entropy_weights():
    g, f = entropy_weights(_batch())
    assert g.tolist() == pytest.approx(G, abs=1e-12)
    assert f.tolist() == pytest.approx(F, abs=1e-12)
    # g has batch mean 1 (up to the 1e-8 in its denominator)
    assert abs(g.mean().item() - 1.0) < 1e-7
    # k scales the exponent: k = 2 -> g ∝ exp(-2 Hn)
    g2, f2 = entropy_weights(_batch(), k=2.0, k_f=3.0)
    raw2 = [math.exp(-2 * h) for h in HN]
    assert g2.tolist() == pytest.approx([x / (sum(raw2) / 5 + 1e-8) for x in raw2], abs=1e-12)
    assert f2.tolist() == pytest.approx([math.exp(-3 * h) for h in HN], abs=1e-12)


def test_next_turn_rows():
    assert next_turn_rows(_batch()).tolist() == NEXT
    with pytest.raises(ValueError, match="more than one row"):
        next_turn_rows(_batch(turn_idx=[0, 0, 0, 1, 2]))


def test_empg_values_and_centring():
    # GRPO base, pooled, norm_std off: scores [1, 1, 0, 0, 0], mu = 0.4 -> [0.6, 0.6, -0.4, -0.4, -0.4]
    base = [0.6, 0.6, -0.4, -0.4, -0.4]
    pre = [a * g + 0.05 * b for a, g, b in zip(base, G, BONUS)]
    expected = [x - sum(pre) / 5 for x in pre]
    adv = empg(_batch(), norm_std=False)
    assert adv.tolist() == pytest.approx(expected, abs=1e-12)
    assert abs(adv.mean().item()) < 1e-15


def test_empg_default_uses_std_normalised_grpo():
    # unbiased std of [1, 1, 0, 0, 0] = sqrt((2 * 0.6^2 + 3 * 0.4^2) / 4) = sqrt(0.3)
    base = [x / (math.sqrt(0.3) + 1e-6) for x in (0.6, 0.6, -0.4, -0.4, -0.4)]
    pre = [a * g + 0.05 * b for a, g, b in zip(base, G, BONUS)]
    expected = [x - sum(pre) / 5 for x in pre]
    assert empg(_batch()).tolist() == pytest.approx(expected, abs=1e-12)


def test_empg_bonus_pairing_isolated():
    # The bonus enters linearly: empg(zeta) - empg(0) = zeta * (bonus - mean(bonus)); the last
    # turns (rows 0 and 4) get no bonus of their own.
    diff = (empg(_batch(), zeta=2.0) - empg(_batch(), zeta=0.0)).tolist()
    mean_bonus = sum(BONUS) / 5
    assert diff == pytest.approx([2.0 * (b - mean_bonus) for b in BONUS], abs=1e-12)


def test_empg_needs_backend_tensors():
    with pytest.raises(ValueError, match="entropy"):
        empg(_batch(entropy=None))
    with pytest.raises(ValueError, match="response_mask"):
        empg(_batch(response_mask=None))
