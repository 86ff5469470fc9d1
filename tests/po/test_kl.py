"""k3 KL and token entropy: hand-derived values, gradients, clamps, stability."""
import math

import pytest
import torch

from arena.po.kl import entropy_from_logits, kl_k3

F64 = torch.float64


def test_k3_hand_values_and_gradient():
    # delta = ref - logp; k3 = e^delta - delta - 1; d k3 / d logp = -(e^delta - 1) (inside the clamps)
    #   delta = 0  -> 0,              grad 0
    #   delta = 1  -> e - 2,          grad -(e - 1)
    #   delta = -1 -> e^-1,           grad -(e^-1 - 1) = 1 - e^-1
    #   delta = -5 -> e^-5 + 4,       grad 1 - e^-5
    logp = torch.zeros(1, 4, dtype=F64, requires_grad=True)
    ref = torch.tensor([[0.0, 1.0, -1.0, -5.0]], dtype=F64)
    k3 = kl_k3(logp, ref)
    expected = torch.tensor([[0.0, math.e - 2, math.exp(-1), math.exp(-5) + 4]], dtype=F64)
    assert torch.allclose(k3, expected, rtol=0, atol=1e-15)
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    expected_grad = torch.tensor([[0.0, -(math.e - 1), 1 - math.exp(-1), 1 - math.exp(-5)]], dtype=F64)
    assert torch.allclose(grad, expected_grad, rtol=0, atol=1e-15)


def test_k3_clamps():
    # delta = 3: e^3 - 4 = 16.09 > 10 -> 10, grad 0 (outer clamp)
    # delta = -12: e^-12 + 11 > 10 -> 10, grad 0; delta = 50 -> inner clamp to 20 -> still 10, finite
    logp = torch.zeros(1, 3, dtype=F64, requires_grad=True)
    ref = torch.tensor([[3.0, -12.0, 50.0]], dtype=F64)
    k3 = kl_k3(logp, ref)
    assert torch.equal(k3, torch.full((1, 3), 10.0, dtype=F64))
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    assert torch.equal(grad, torch.zeros(1, 3, dtype=F64))
    # extreme inputs stay finite through the inner ±20 clamp
    assert torch.isfinite(kl_k3(torch.tensor([[-1e6]]), torch.tensor([[1e6]]))).all()
    with pytest.raises(ValueError, match=r"\(1, 3\) and \(1, 2\)"):
        kl_k3(torch.zeros(1, 3), torch.zeros(1, 2))


def test_k3_nonnegative():
    # e^x >= 1 + x, so k3 >= 0 everywhere
    gen = torch.Generator().manual_seed(0)
    assert (kl_k3(torch.randn(50, 20, generator=gen), torch.randn(50, 20, generator=gen)) >= 0).all()


def test_entropy_hand_and_stable():
    # uniform over V: H = log V; logits [0, log 3] -> p = [1/4, 3/4], H = -(1/4 log 1/4 + 3/4 log 3/4)
    # (the last two logits of row 2 are effectively impossible tokens, but finite)
    logits = torch.tensor([[[2.0, 2.0, 2.0, 2.0], [0.0, math.log(3), -1e300, -1e300]]], dtype=F64)
    h = entropy_from_logits(logits)
    expected = torch.tensor([[math.log(4), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]], dtype=F64)
    assert h.shape == (1, 2)
    assert torch.allclose(h, expected, rtol=0, atol=1e-14)
    # huge logits: no overflow (a naive softmax-log would give nan); near-deterministic -> H ~ 0
    big = torch.tensor([[[1000.0, 0.0, -1000.0]]])
    assert torch.isfinite(entropy_from_logits(big)).all()
    assert entropy_from_logits(big).item() == pytest.approx(0.0, abs=1e-6)


def test_entropy_matches_definition():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 11, generator=gen, dtype=F64) * 3
    p = torch.softmax(logits, dim=-1)
    assert torch.allclose(entropy_from_logits(logits), -(p * p.log()).sum(-1), rtol=0, atol=1e-13)
