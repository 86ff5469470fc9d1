"""arena.po against verl 0.9.1: the same numbers where we mean the same thing, pinned differences
where we do not (SAPO's tau rule and aggregation; the fork's per-micro-batch normalisation).

Tolerance: relative 1e-7 (the brief allows 1e-6). The one systematic gap is verl's
seq-mean-token-mean, which divides each row sum by (n_j + 1e-8) where we divide by n_j exactly.
"""
import math
import warnings

import pytest
import torch

pytest.importorskip("verl")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
    from verl.utils.torch_functional import entropy_from_logits as verl_entropy
    from verl.workers.config import ActorConfig

from arena.backends.verl.agg_modes import VERL_AGG_MODE
from arena.po.aggregation import AGG, AggNorm
from arena.po.clipping import CLIP
from arena.po.kl import entropy_from_logits, kl_k3

F64 = torch.float64
TOL = dict(rtol=1e-7, atol=1e-12)
SHAPES = [(1, 1), (5, 7), (16, 33)]
# our method -> (verl loss_mode, our hyperparameters, verl ActorConfig fields)
METHODS = {
    "ppo": ("vanilla", dict(eps_low=0.2, eps_high=0.28, clip_c=2.5),
            dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=2.5)),
    "gspo": ("gspo", dict(eps_low=0.03, eps_high=0.04), dict(clip_ratio_low=0.03, clip_ratio_high=0.04)),
    "cispo": ("cispo", dict(eps_low=1.0, eps_high=0.2), dict(clip_ratio_low=1.0, clip_ratio_high=0.2)),
}


def _config(global_batch_info=None, **fields):
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                       global_batch_info=dict(global_batch_info or {}), **fields)


def _global_info(norm: AggNorm) -> dict:
    # what verl's ppo_loss puts into config.global_batch_info, for one data-parallel rank
    return dict(dp_size=1, batch_num_tokens=norm.num_tokens, global_batch_size=norm.num_seqs,
                loss_scale_factor=norm.horizon)


def _batch(rows, width, seed):
    """Right-padded float64 batch with variable lengths (an empty row when rows > 1). Row 0 is
    on-policy (ratio 1, inside every clip band), so the gradient is never all zero."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=gen)  # [B]
    if rows > 1:
        lengths[rows // 2] = 0
    mask = (torch.arange(width)[None, :] < lengths[:, None]).to(F64)  # [B, T]
    old = -3 * torch.rand(rows, width, generator=gen, dtype=F64)  # [B, T]
    logp = old + 0.4 * torch.randn(rows, width, generator=gen, dtype=F64)  # [B, T]
    logp[0] = old[0]
    adv = torch.randn(rows, 1, generator=gen, dtype=F64).expand(rows, width) * mask  # [B, T]
    return logp, old, adv, mask


def _ours(method, agg, logp0, old, adv, mask, norm=None):
    logp = logp0.clone().requires_grad_()
    loss_tok, _ = CLIP[method](logp, old, adv, mask, **METHODS[method][1])
    value = AGG[agg](loss_tok, mask, norm=norm)
    return value.detach(), torch.autograd.grad(value, logp)[0]


def _verl(mode, config, agg_mode, logp0, old, adv, mask):
    logp = logp0.clone().requires_grad_()
    value, _ = get_policy_loss_fn(mode)(old_log_prob=old, log_prob=logp, advantages=adv,
                                        response_mask=mask.bool(), loss_agg_mode=agg_mode, config=config)
    return value.detach(), torch.autograd.grad(value, logp)[0]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("agg", sorted(AGG))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_clip_losses_match_verl_local_norm(method, agg, shape):
    logp, old, adv, mask = _batch(*shape, seed=sum(shape))
    mode, _, fields = METHODS[method]
    ours = _ours(method, agg, logp, old, adv, mask)
    theirs = _verl(mode, _config(**fields), VERL_AGG_MODE[agg], logp, old, adv, mask)
    assert torch.allclose(ours[0], theirs[0], **TOL)
    assert torch.allclose(ours[1], theirs[1], **TOL)
    assert ours[1].abs().sum() > 0  # the comparison is not between two zero gradients


@pytest.mark.parametrize("horizon", [None, 40.0])
@pytest.mark.parametrize("agg", sorted(AGG))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_clip_losses_match_verl_global_norm(method, agg, horizon):
    # micro-batches normalised by the mini-batch's counts: each equals verl with global_batch_info,
    # and their sum equals the full mini-batch (ours), value and gradient
    logp, old, adv, mask = _batch(12, 9, seed=7)
    norm = AggNorm.of(mask, horizon=horizon)
    mode, _, fields = METHODS[method]
    config = _config(_global_info(norm), **fields)
    full_value, full_grad = _ours(method, agg, logp, old, adv, mask, norm=norm)
    total, grad = 0.0, torch.zeros_like(logp)
    for a, b in [(0, 5), (5, 6), (6, 12)]:
        ours = _ours(method, agg, logp[a:b], old[a:b], adv[a:b], mask[a:b], norm=norm)
        theirs = _verl(mode, config, VERL_AGG_MODE[agg], logp[a:b], old[a:b], adv[a:b], mask[a:b])
        assert torch.allclose(ours[0], theirs[0], **TOL)
        assert torch.allclose(ours[1], theirs[1], **TOL)
        total, grad[a:b] = total + ours[0], ours[1]
    assert torch.allclose(total, full_value, rtol=0, atol=1e-12)
    assert torch.allclose(grad, full_grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("agg", sorted(AGG))
def test_aggregation_matches_verl_agg_loss(agg):
    gen = torch.Generator().manual_seed(11)
    loss = torch.randn(9, 6, generator=gen, dtype=F64)
    lengths = torch.tensor([6, 0, 1, 3, 6, 2, 0, 5, 4])
    mask = (torch.arange(6)[None, :] < lengths[:, None]).to(F64)
    norm = AggNorm(num_tokens=50.0, num_seqs=13.0, horizon=17.0)
    assert torch.allclose(AGG[agg](loss, mask), agg_loss(loss, mask, VERL_AGG_MODE[agg]), **TOL)
    theirs = agg_loss(loss, mask, VERL_AGG_MODE[agg], **_global_info(norm))
    assert torch.allclose(AGG[agg](loss, mask, norm=norm), theirs, **TOL)


def test_fork_per_micro_batch_norm_differs_from_global():
    # Two micro-batches with unequal token counts: mb1 one token of loss 1, mb2 three tokens of loss 3.
    # Global token mean = (1 + 9) / 4 = 2.5. The fork (and verl without global info) averages the
    # micro-batch means: (1 + 3) / 2 = 2.0. Ours norm=None reproduces the fork; norm=global verl's.
    loss = torch.tensor([[1.0, 0.0, 0.0], [3.0, 3.0, 3.0]], dtype=F64)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=F64)
    local = [AGG["token_mean"](loss[i : i + 1], mask[i : i + 1]) for i in range(2)]
    assert [v.item() for v in local] == [1.0, 3.0]
    assert [agg_loss(loss[i : i + 1], mask[i : i + 1], "token-mean").item() for i in range(2)] == [1.0, 3.0]
    assert (sum(local) / 2).item() == 2.0
    norm = AggNorm.of(mask)
    summed = sum(AGG["token_mean"](loss[i : i + 1], mask[i : i + 1], norm=norm) for i in range(2))
    verl_summed = sum(agg_loss(loss[i : i + 1], mask[i : i + 1], "token-mean", **_global_info(norm)) for i in range(2))
    assert summed.item() == 2.5 and verl_summed.item() == 2.5


SAPO_HP = dict(tau_pos=1.0, tau_neg=1.05)


def test_sapo_equals_verl_under_seq_mean_token_mean():
    # With broadcast advantages the two tau rules agree on every valid token (masked tokens have
    # A = 0 and add 0), so our gates aggregated by seq_mean_token_mean equal verl's sapo, which
    # forces seq-mean-token-mean whatever loss_agg_mode says.
    logp0, old, adv, mask = _batch(10, 8, seed=5)
    for verl_mode in ("token-mean", "seq-mean-token-mean"):
        logp = logp0.clone().requires_grad_()
        ours = AGG["seq_mean_token_mean"](CLIP["sapo"](logp, old, adv, mask, **SAPO_HP)[0], mask)
        ours_grad = torch.autograd.grad(ours, logp)[0]
        theirs, theirs_grad = _verl("sapo", _config(**SAPO_HP), verl_mode, logp0, old, adv, mask)
        assert torch.allclose(ours, theirs, **TOL) and torch.allclose(ours_grad, theirs_grad, **TOL)


def test_sapo_intended_difference_aggregation():
    # Intended: our SAPO uses the configured aggregation (the fork's token_mean); verl forces
    # seq-mean-token-mean. With unequal lengths the two differ.
    logp0, old, adv, mask = _batch(10, 8, seed=5)
    ours = AGG["token_mean"](CLIP["sapo"](logp0, old, adv, mask, **SAPO_HP)[0], mask)
    theirs, _ = _verl("sapo", _config(**SAPO_HP), "token-mean", logp0, old, adv, mask)
    assert abs(ours.item() - theirs.item()) > 1e-3


def test_sapo_intended_difference_tau_rule():
    # Intended: tau by the sign of the sequence-mean advantage (fork) vs the token's sign (verl).
    # One row, r = 1, A = [+1, -3]: the gate is 2/tau, L = -2A/tau, seq-mean-token-mean = row mean.
    #   ours: mean A = -1 -> tau_neg = 1.05 on both: L = [-2/1.05, 6/1.05], mean = 2/1.05
    #   verl: token 0 tau_pos = 1: -2; token 1 tau_neg: 6/1.05; mean = (-2 + 6/1.05)/2
    logp = torch.zeros(1, 2, dtype=F64)
    adv = torch.tensor([[1.0, -3.0]], dtype=F64)
    mask = torch.ones(1, 2, dtype=F64)
    ours = AGG["seq_mean_token_mean"](CLIP["sapo"](logp, logp, adv, mask, **SAPO_HP)[0], mask)
    theirs, _ = _verl("sapo", _config(**SAPO_HP), "seq-mean-token-mean", logp, logp, adv, mask)
    assert ours.item() == pytest.approx(2 / 1.05, rel=1e-14)
    assert theirs.item() == pytest.approx((-2 + 6 / 1.05) / 2, rel=1e-7)


def test_k3_matches_verl_low_var_kl():
    gen = torch.Generator().manual_seed(9)
    logp0 = torch.randn(7, 13, generator=gen, dtype=F64) * 4  # wide spread: both clamps are hit
    ref = torch.randn(7, 13, generator=gen, dtype=F64) * 4
    grads = []
    for fn in (kl_k3, lambda lp, rf: kl_penalty(lp, rf, "low_var_kl")):
        logp = logp0.clone().requires_grad_()
        value = fn(logp, ref)
        grads.append((value.detach(), torch.autograd.grad(value.sum(), logp)[0]))
    assert (grads[0][0] == 10.0).any() and (grads[0][0] < 10.0).any()
    assert torch.allclose(grads[0][0], grads[1][0], rtol=0, atol=1e-15)
    assert torch.allclose(grads[0][1], grads[1][1], rtol=0, atol=1e-15)


def test_entropy_matches_verl():
    logits = torch.randn(3, 4, 50, generator=torch.Generator().manual_seed(3), dtype=F64) * 5
    assert torch.allclose(entropy_from_logits(logits), verl_entropy(logits), rtol=0, atol=1e-14)
    assert not math.isnan(entropy_from_logits(logits).sum().item())
