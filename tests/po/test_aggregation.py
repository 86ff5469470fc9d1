"""Aggregations: hand-derived values, padding invariance, exact gradient accumulation, bad input."""
import math

import pytest
import torch

from arena.backends.verl.agg_modes import VERL_AGG_MODE
from arena.po.aggregation import AGG, AggNorm, get_agg

F64 = torch.float64


def _hand_batch():
    # L = [[1, 2, 3], [4, 5, 6]], M = [[1, 1, 1], [1, 0, 0]]
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=F64)
    return loss, mask


# Hand derivation (row sums s = [6, 4], counts n = [3, 1], N_tok = 4, N_seq = 2, T = 3):
#   token_mean              = (1+2+3+4) / 4        = 2.5
#   seq_mean_token_mean     = (6/3 + 4/1) / 2      = 3.0
#   seq_mean_token_sum      = (6 + 4) / 2          = 5.0
#   seq_mean_token_sum_norm = 5.0 / T = 5 / 3
HAND = {"token_mean": 2.5, "seq_mean_token_mean": 3.0, "seq_mean_token_sum": 5.0, "seq_mean_token_sum_norm": 5.0 / 3}


@pytest.mark.parametrize("name", sorted(AGG))
def test_hand_values(name):
    loss, mask = _hand_batch()
    assert AGG[name](loss, mask).item() == pytest.approx(HAND[name], abs=1e-15)
    # a bool mask gives the same value
    assert AGG[name](loss, mask.bool()).item() == pytest.approx(HAND[name], abs=1e-15)


def test_hand_values_with_global_norm():
    # norm = (N_tok=8, N_seq=4, H=2): token_mean = 10/8; seq-means divide by 4; sum_norm by 4*2
    loss, mask = _hand_batch()
    norm = AggNorm(num_tokens=8, num_seqs=4, horizon=2)
    assert AGG["token_mean"](loss, mask, norm=norm).item() == pytest.approx(10 / 8, abs=1e-15)
    assert AGG["seq_mean_token_mean"](loss, mask, norm=norm).item() == pytest.approx(6 / 4, abs=1e-15)
    assert AGG["seq_mean_token_sum"](loss, mask, norm=norm).item() == pytest.approx(10 / 4, abs=1e-15)
    assert AGG["seq_mean_token_sum_norm"](loss, mask, norm=norm).item() == pytest.approx(10 / 8, abs=1e-15)


def test_aggnorm_of_counts():
    # mask rows have 3, 1, 0 valid tokens: N_tok = 4, N_seq = 2 (the empty row does not count)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert AggNorm.of(mask) == AggNorm(num_tokens=4.0, num_seqs=2.0, horizon=None)
    assert AggNorm.of(mask.bool(), horizon=512).horizon == 512.0
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        AggNorm.of(torch.ones(3))


@pytest.mark.parametrize("name", sorted(AGG))
def test_extra_padding_is_invisible(name):
    # extra masked columns (any finite values) and extra fully masked rows change nothing,
    # for norm=None; seq_mean_token_sum_norm divides by T, so its horizon is pinned to 3.
    loss, mask = _hand_batch()
    wide_loss = torch.cat([loss, torch.full((2, 4), 7.0, dtype=F64)], dim=1)  # [2, 7]
    wide_mask = torch.cat([mask, torch.zeros(2, 4, dtype=F64)], dim=1)  # [2, 7]
    tall_loss = torch.cat([wide_loss, torch.full((3, 7), -9.0, dtype=F64)])  # [5, 7]
    tall_mask = torch.cat([wide_mask, torch.zeros(3, 7, dtype=F64)])  # [5, 7]
    norm = AggNorm(num_tokens=4, num_seqs=2, horizon=3) if name == "seq_mean_token_sum_norm" else None
    for padded_loss, padded_mask in [(wide_loss, wide_mask), (tall_loss, tall_mask)]:
        assert AGG[name](padded_loss, padded_mask, norm=norm).item() == pytest.approx(HAND[name], abs=1e-15)


def test_sum_norm_default_horizon_is_padded_length():
    # without a horizon, seq_mean_token_sum_norm divides by the tensor's T: 5 / 7 at T = 7
    loss, mask = _hand_batch()
    wide_loss = torch.cat([loss, torch.zeros(2, 4, dtype=F64)], dim=1)
    wide_mask = torch.cat([mask, torch.zeros(2, 4, dtype=F64)], dim=1)
    assert AGG["seq_mean_token_sum_norm"](wide_loss, wide_mask).item() == pytest.approx(5 / 7, abs=1e-15)


@pytest.mark.parametrize("name", sorted(AGG))
def test_empty_is_zero_not_nan(name):
    loss = torch.full((3, 4), 2.0, dtype=F64, requires_grad=True)
    mask = torch.zeros(3, 4, dtype=F64)
    for norm in (None, AggNorm.of(mask)):
        value = AGG[name](loss, mask, norm=norm)
        assert value.item() == 0.0
        (grad,) = torch.autograd.grad(value, loss)
        assert torch.equal(grad, torch.zeros_like(grad))
    assert AGG[name](torch.zeros(0, 4, dtype=F64), torch.zeros(0, 4, dtype=F64)).item() == 0.0


def _random_batch(seed, rows=11, width=9):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, width + 1, (rows,), generator=gen)  # [B]
    lengths[2] = 0  # at least one empty row
    lengths[5] = width  # and one full row
    mask = (torch.arange(width)[None, :] < lengths[:, None]).to(F64)  # [B, T]
    loss = torch.randn(rows, width, generator=gen, dtype=F64).requires_grad_()  # [B, T]
    return loss, mask


@pytest.mark.parametrize("name", sorted(AGG))
@pytest.mark.parametrize("horizon", [None, 20.0])
def test_micro_batch_accumulation_is_exact(name, horizon):
    # sum over micro-batches with the mini-batch's global counts == the full mini-batch value
    loss, mask = _random_batch(seed=3)
    norm = AggNorm.of(mask, horizon=horizon)
    full = AGG[name](loss, mask, norm=norm)
    (full_grad,) = torch.autograd.grad(full, loss)
    # the full value with norm equals the local value (same counts)
    assert full.item() == pytest.approx(AGG[name](loss, mask, norm=None if horizon is None else norm).item(), abs=1e-12)
    bounds = [(0, 3), (3, 4), (4, 9), (9, 11)]  # unequal micro-batches, one of a single row
    accumulated = sum(AGG[name](loss[a:b], mask[a:b], norm=norm) for a, b in bounds)
    (acc_grad,) = torch.autograd.grad(accumulated, loss)
    assert accumulated.item() == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(acc_grad, full_grad, rtol=0, atol=1e-12)


def test_gradient_of_token_mean_by_hand():
    # d/dL_jt token_mean = M_jt / N_tok = M / 4 for the hand batch
    loss, mask = _hand_batch()
    loss.requires_grad_()
    (grad,) = torch.autograd.grad(AGG["token_mean"](loss, mask), loss)
    assert torch.equal(grad, mask / 4)
    # d/dL_jt seq_mean_token_mean = M_jt / (n_j N_seq): row 0 -> 1/6, row 1 -> 1/2 on its one token
    (grad,) = torch.autograd.grad(AGG["seq_mean_token_mean"](loss, mask), loss)
    expected = torch.tensor([[1 / 6, 1 / 6, 1 / 6], [1 / 2, 0, 0]], dtype=F64)
    assert torch.allclose(grad, expected, rtol=0, atol=1e-15)


def test_bad_input_and_names():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 4\)"):
        AGG["token_mean"](torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="seq_mean_token_mean"):
        get_agg("seq-mean-token-mean")
    assert get_agg("token_mean") is AGG["token_mean"]
    assert set(VERL_AGG_MODE) == set(AGG)
    assert VERL_AGG_MODE["seq_mean_token_sum_norm"] == "seq-mean-token-sum-norm"
    assert math.isfinite(AGG["token_mean"](torch.ones(1, 1), torch.ones(1, 1)).item())
