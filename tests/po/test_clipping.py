"""Clip losses: hand-derived branches, identities between methods, the sequence mask, bad input."""
import math

import pytest
import torch

from arena.po.clipping import CLIP, check_shapes, count_masked, get_clip, seq_mask

F64 = torch.float64
E = math.e
KEYS = {"clipfrac_high", "clipfrac_low", "clipfrac_pos_adv", "clipfrac_neg_adv"}


def _leaf(values):
    return torch.tensor(values, dtype=F64, requires_grad=True)


def _grad(loss_tok, logp, mask):
    # gradient of sum_t L M with respect to logp
    (grad,) = torch.autograd.grad((loss_tok * mask).sum(), logp)
    return grad


def _ppo_batch():
    # old = 0, so d = logp and r = e^d. Row 0: A = +1, r = [0.5, 1, e]; row 1: A = -1, r = [0.5, e, 5]
    logp = _leaf([[math.log(0.5), 0.0, 1.0], [math.log(0.5), 1.0, math.log(5.0)]])
    old = torch.zeros(2, 3, dtype=F64)
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3], dtype=F64)
    return logp, old, adv, torch.ones(2, 3, dtype=F64)


def test_ppo_hand_branches():
    # eps 0.2/0.2, c = 3. L1 = -A r, L2 = -A clip(r, 0.8, 1.2), Lc = max(L1, L2), A<0: min(Lc, -A c)
    # A=+1, r=0.5: L1=-0.5, L2=-0.8 -> -0.5 (unclipped, dL/dlogp = -A r = -0.5)
    # A=+1, r=1  : -1 (unclipped, grad -1)
    # A=+1, r=e  : L1=-e, L2=-1.2 -> -1.2 (clipped high, grad 0)
    # A=-1, r=0.5: L1=0.5, L2=0.8 -> 0.8 (clipped low, grad 0)
    # A=-1, r=e  : L1=e, L2=1.2 -> e; min(e, 3) = e (unclipped, grad -A r = e)
    # A=-1, r=5  : L1=5 -> min(5, 3) = 3 (dual clip, grad 0)
    logp, old, adv, mask = _ppo_batch()
    loss, metrics = CLIP["ppo"](logp, old, adv, mask, eps_low=0.2, eps_high=0.2, clip_c=3.0)
    expected = torch.tensor([[-0.5, -1.0, -1.2], [0.8, E, 3.0]], dtype=F64)
    assert torch.allclose(loss, expected, rtol=0, atol=1e-14)
    grad = _grad(loss, logp, mask)
    assert torch.allclose(grad, torch.tensor([[-0.5, -1.0, 0.0], [0.0, E, 0.0]], dtype=F64), rtol=0, atol=1e-14)
    # above 1.2: e, e, 5 -> 3/6; below 0.8: 0.5, 0.5 -> 2/6; A>0 above: e -> 1/3; A<0 below: 0.5 -> 1/3
    assert {k: round(v.item(), 12) for k, v in metrics.items()} == {
        "clipfrac_high": 0.5, "clipfrac_low": round(1 / 3, 12),
        "clipfrac_pos_adv": round(1 / 3, 12), "clipfrac_neg_adv": round(1 / 3, 12),
    }


def test_ppo_log_ratio_clamp_and_bad_clip_c():
    # d = 50 is clamped to 20: A=-1 -> dual clip 3 (grad 0); d = -50 -> r = e^-20, A=-1 -> 0.8
    logp, old = _leaf([[50.0, -50.0]]), torch.zeros(1, 2, dtype=F64)
    adv, mask = torch.full((1, 2), -1.0, dtype=F64), torch.ones(1, 2, dtype=F64)
    loss, _ = CLIP["ppo"](logp, old, adv, mask)
    assert torch.allclose(loss, torch.tensor([[3.0, 0.8]], dtype=F64), rtol=0, atol=1e-14)
    assert torch.equal(_grad(loss, logp, mask), torch.zeros(1, 2, dtype=F64))
    with pytest.raises(ValueError, match="clip_c"):
        CLIP["ppo"](logp, old, adv, mask, clip_c=1.0)


def test_gspo_hand():
    # eps 0.2/0.2. Row 0: A=+1, d = [0.1, 0.3, (masked 5)] -> ls = 0.2, s = e^0.2 = 1.2214 > 1.2:
    #   L = -min(s, 1.2) = -1.2 on every token, grad 0.
    # Row 1: A=-1, same d -> L = -A max(s, 0.8) = s, grad -A s = s on the two valid tokens.
    # Row 2: A=+1, d = [-0.1, 0.1, (masked)] -> ls = 0, s = 1: L = -1, grad -1.
    old = torch.zeros(3, 3, dtype=F64)
    logp = _leaf([[0.1, 0.3, 5.0], [0.1, 0.3, 5.0], [-0.1, 0.1, 0.0]])
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3, [1.0] * 3], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 0]], dtype=F64)
    loss, metrics = CLIP["gspo"](logp, old, adv, mask, eps_low=0.2, eps_high=0.2)
    s = math.exp(0.2)
    assert torch.allclose(loss * mask, torch.tensor([[-1.2, -1.2, 0], [s, s, 0], [-1, -1, 0]], dtype=F64), atol=1e-14)
    assert torch.allclose(_grad(loss, logp, mask), torch.tensor([[0, 0, 0], [s, s, 0], [-1, -1, 0]], dtype=F64),
                          rtol=0, atol=1e-14)
    # sequence ratios 1.22, 1.22, 1 on 2 valid tokens each: high 4/6; A>0 tokens (4) above: 2 -> 1/2
    assert metrics["clipfrac_high"].item() == pytest.approx(4 / 6, abs=1e-15)
    assert metrics["clipfrac_pos_adv"].item() == pytest.approx(0.5, abs=1e-15)
    assert metrics["clipfrac_low"].item() == 0.0 and metrics["clipfrac_neg_adv"].item() == 0.0


def test_gspo_log_ratio_clamp_at_10():
    # ls = 12 > 10: s = e^10 (value) and the clamp kills the gradient; A=-1, eps_low 0.2 -> L = e^10
    logp, old = _leaf([[12.0, 12.0]]), torch.zeros(1, 2, dtype=F64)
    adv, mask = torch.full((1, 2), -1.0, dtype=F64), torch.ones(1, 2, dtype=F64)
    loss, _ = CLIP["gspo"](logp, old, adv, mask, eps_low=0.2, eps_high=0.2)
    assert torch.allclose(loss, torch.full((1, 2), math.exp(10), dtype=F64), rtol=1e-15, atol=0)
    assert torch.equal(_grad(loss, logp, mask), torch.zeros(1, 2, dtype=F64))


def test_gspo_on_length_one_equals_ppo_without_dual_clip():
    # with one token, ls = d and s = r; with c huge the dual clip never binds, so the two coincide
    gen = torch.Generator().manual_seed(0)
    logp0 = torch.randn(64, 1, generator=gen, dtype=F64)
    old = logp0 + 0.5 * torch.randn(64, 1, generator=gen, dtype=F64)
    adv = torch.randn(64, 1, generator=gen, dtype=F64)
    mask = torch.ones(64, 1, dtype=F64)
    out = {}
    for name, hp in [("gspo", dict(eps_low=0.1, eps_high=0.15)), ("ppo", dict(eps_low=0.1, eps_high=0.15, clip_c=1e9))]:
        logp = logp0.clone().requires_grad_()
        loss, metrics = CLIP[name](logp, old, adv, mask, **hp)
        out[name] = (loss.detach(), _grad(loss, logp, mask), metrics)
    assert torch.allclose(out["gspo"][0], out["ppo"][0], rtol=1e-14, atol=1e-14)
    assert torch.allclose(out["gspo"][1], out["ppo"][1], rtol=1e-14, atol=1e-14)
    assert out["gspo"][1].abs().sum() > 0  # some tokens do carry a gradient
    for key in KEYS:
        assert out["gspo"][2][key].item() == pytest.approx(out["ppo"][2][key].item(), abs=1e-15)


def test_cispo_hand_and_stop_gradient():
    # old = 0, r = [e, 0.5], A = +2, logp = [1, log 0.5]
    # eps 0.2/0.2: w = sg(clip(r, 0.8, 1.2)) = [1.2, 0.8]; L = -w A logp; dL/dlogp = -w A = [-2.4, -1.6]
    #   (no r' term: the clipped weight is a constant)
    # eps_low 1.0 (lower bound 0): w = [1.2, 0.5] -> grad [-2.4, -1.0]
    logp = _leaf([[1.0, math.log(0.5)]])
    old, adv, mask = torch.zeros(1, 2, dtype=F64), torch.full((1, 2), 2.0, dtype=F64), torch.ones(1, 2, dtype=F64)
    loss, metrics = CLIP["cispo"](logp, old, adv, mask, eps_low=0.2, eps_high=0.2)
    assert torch.allclose(loss, torch.tensor([[-2.4, -1.6 * math.log(0.5)]], dtype=F64), rtol=0, atol=1e-14)
    assert torch.allclose(_grad(loss, logp, mask), torch.tensor([[-2.4, -1.6]], dtype=F64), rtol=0, atol=1e-14)
    assert metrics["clipfrac_high"].item() == 0.5 and metrics["clipfrac_low"].item() == 0.5
    loss, metrics = CLIP["cispo"](logp, old, adv, mask)  # defaults eps_low=1.0, eps_high=0.2
    assert torch.allclose(_grad(loss, logp, mask), torch.tensor([[-2.4, -1.0]], dtype=F64), rtol=0, atol=1e-14)
    assert metrics["clipfrac_low"].item() == 0.0  # nothing is below 1 - 1.0 = 0


def test_cispo_unbounded_is_reinforce():
    # eps_low = 1, eps_high = inf: w = r. On-policy (r = 1) the gradient is -A grad logp (REINFORCE);
    # off-policy it is -r A grad logp.
    gen = torch.Generator().manual_seed(1)
    logp = torch.randn(5, 4, generator=gen, dtype=F64).requires_grad_()
    adv = torch.randn(5, 1, generator=gen, dtype=F64).expand(5, 4)
    mask = torch.ones(5, 4, dtype=F64)
    loss, _ = CLIP["cispo"](logp, logp.detach(), adv, mask, eps_low=1.0, eps_high=math.inf)
    assert torch.allclose(_grad(loss, logp, mask), -adv, rtol=0, atol=1e-15)
    old = logp.detach() - 0.3 * torch.randn(5, 4, generator=gen, dtype=F64)
    loss, _ = CLIP["cispo"](logp, old, adv, mask, eps_low=1.0, eps_high=math.inf)
    assert torch.allclose(_grad(loss, logp, mask), -(logp.detach() - old).exp() * adv, rtol=1e-14, atol=0)


def test_sapo_hand_gate():
    # old = 0, logp = 1 -> r = e. f = (4/tau) sigmoid(tau (r - 1)), L = -f A.
    # dL/dlogp = -A (4/tau) sig'(.) tau r = -A 4 sig (1 - sig) r.
    # Row 0: A = +0.5 -> tau_pos = 2. Row 1: A = -0.5 -> tau_neg = 3.
    logp = _leaf([[1.0], [1.0]])
    old, mask = torch.zeros(2, 1, dtype=F64), torch.ones(2, 1, dtype=F64)
    adv = torch.tensor([[0.5], [-0.5]], dtype=F64)
    loss, _ = CLIP["sapo"](logp, old, adv, mask, tau_pos=2.0, tau_neg=3.0)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected, grads = [], []
    for a, tau in [(0.5, 2.0), (-0.5, 3.0)]:
        g = sig(tau * (E - 1))
        expected.append([-a * 4 / tau * g])
        grads.append([-a * 4 * g * (1 - g) * E])
    assert torch.allclose(loss, torch.tensor(expected, dtype=F64), rtol=1e-14, atol=0)
    assert torch.allclose(_grad(loss, logp, mask), torch.tensor(grads, dtype=F64), rtol=1e-13, atol=0)


def test_sapo_tau_by_sequence_mean_advantage():
    # Non-broadcast advantages expose the rule. r = 1 -> f = (4/tau) sigmoid(0) = 2/tau, L = -2A/tau.
    # Row 0: A = [+1, -3], mean -1 < 0 -> tau_neg = 4 for both tokens: L = [-0.5, 1.5]
    #   (a token-sign rule would give the +1 token tau_pos = 2, L = -1).
    # Row 1: A = [+1, -1], mean 0 -> tau_neg (A = 0 counts as negative): L = [-0.5, 0.5]
    # Row 2: A = [+1, -3 (masked)], mean over valid tokens +1 -> tau_pos: L = [-1, 3]
    logp = _leaf([[0.0, 0.0]] * 3)
    adv = torch.tensor([[1.0, -3.0], [1.0, -1.0], [1.0, -3.0]], dtype=F64)
    mask = torch.tensor([[1, 1], [1, 1], [1, 0]], dtype=F64)
    loss, _ = CLIP["sapo"](logp, logp.detach(), adv, mask, tau_pos=2.0, tau_neg=4.0)
    assert torch.allclose(loss, torch.tensor([[-0.5, 1.5], [-0.5, 0.5], [-1.0, 3.0]], dtype=F64), rtol=0, atol=1e-15)


def test_sapo_gradient_at_ratio_one_is_policy_gradient():
    # f'(1) = (4/tau) tau sigmoid'(0) = 1, and dr/dlogp = r = 1, so dL/dlogp = -A for any tau
    gen = torch.Generator().manual_seed(2)
    logp = torch.randn(6, 5, generator=gen, dtype=F64).requires_grad_()
    adv = torch.randn(6, 1, generator=gen, dtype=F64).expand(6, 5)
    mask = torch.ones(6, 5, dtype=F64)
    for taus in [(1.0, 1.05), (2.0, 2.1), (0.3, 7.0)]:
        loss, _ = CLIP["sapo"](logp, logp.detach(), adv, mask, tau_pos=taus[0], tau_neg=taus[1])
        assert torch.allclose(_grad(loss, logp, mask), -adv, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", sorted(CLIP))
def test_metrics_contract_and_finite_padding(name):
    # masked positions hold extreme but finite log-probs: the loss stays finite everywhere
    logp = _leaf([[-0.1, -1e4], [-0.2, 1e4]])
    old = torch.tensor([[-0.3, 1e4], [-0.1, -1e4]], dtype=F64)
    adv = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=F64)
    mask = torch.tensor([[1, 0], [1, 0]], dtype=F64)
    loss, metrics = CLIP[name](logp, old, adv, mask)
    assert torch.isfinite(loss).all()
    assert torch.isfinite(_grad(loss, logp, mask)).all()
    assert set(metrics) == KEYS
    for value in metrics.values():
        assert value.dim() == 0 and not value.requires_grad and torch.isfinite(value)
    assert metrics["clipfrac_neg_adv"].item() == 0.0  # no A<0 token: empty denominator -> 0
    _, empty = CLIP[name](logp, old, adv, torch.zeros(2, 2, dtype=F64))
    assert all(v.item() == 0.0 for v in empty.values())


def test_seq_mask_hand():
    # D_j = mean over valid tokens of (old - logp); delta = 0.1. Reject iff mean A < 0 and D > delta.
    # Row 0: A=-1, D = 0.2 -> rejected.       Row 1: A=-1, D = 0.05 -> kept.
    # Row 2: A=+1, D = 0.2 -> kept.           Row 3: A=-1, D = 0.1 exactly (not > delta) -> kept.
    # Row 4: A=-1, valid D = 0.05, the masked token (old - logp = 9) is ignored -> kept.
    logp = torch.zeros(5, 2, dtype=F64)
    old = torch.tensor([[0.2, 0.2], [0.05, 0.05], [0.2, 0.2], [0.1, 0.1], [0.05, 9.0]], dtype=F64)
    adv = torch.tensor([[-1.0] * 2, [-1.0] * 2, [1.0] * 2, [-1.0] * 2, [-1.0] * 2], dtype=F64)
    mask = torch.tensor([[1, 1], [1, 1], [1, 1], [1, 1], [1, 0]], dtype=F64)
    out = seq_mask(logp, old, adv, mask, 0.1)
    assert out.dtype == mask.dtype
    assert torch.equal(out, torch.tensor([[0, 0], [1, 1], [1, 1], [1, 1], [1, 0]], dtype=F64))
    assert count_masked(mask, out).item() == 1
    bool_out = seq_mask(logp, old, adv, mask.bool(), 0.1)
    assert bool_out.dtype == torch.bool and torch.equal(bool_out, out.bool())


def test_seq_mask_off_and_unclamped():
    gen = torch.Generator().manual_seed(4)
    logp, old = torch.randn(4, 3, generator=gen, dtype=F64), torch.randn(4, 3, generator=gen, dtype=F64) + 5
    adv, mask = -torch.ones(4, 3, dtype=F64), torch.ones(4, 3, dtype=F64)
    for delta in (None, math.inf):
        assert torch.equal(seq_mask(logp, old, adv, mask, delta), mask)
    # unclamped log-ratio: D = 30 > delta = 25 rejects (a ±20 clamp would keep it)
    far_old = torch.full((1, 1), 30.0, dtype=F64)
    one = torch.ones(1, 1, dtype=F64)
    out = seq_mask(torch.zeros(1, 1, dtype=F64), far_old, -one, one, 25.0)
    assert out.item() == 0.0


def test_shape_mismatch_and_names():
    a, b = torch.zeros(2, 3), torch.zeros(2, 4)
    for name in CLIP:
        with pytest.raises(ValueError, match=r"mask=\(2, 4\)"):
            CLIP[name](a, a, a, b)
    with pytest.raises(ValueError, match=r"old_logp=\(2, 4\)"):
        seq_mask(a, b, a, a, 0.1)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        check_shapes(torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="cispo"):
        get_clip("vanilla")
    assert get_clip("sapo") is CLIP["sapo"]
