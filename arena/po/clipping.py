"""Importance-sampling clipping: per-token policy losses (dimension 2, docs/methods.md §5), and the
sequence mask members (`SEQ_MASK`, docs/methods.md §5.5).

Every loss has the signature `fn(logp, old_logp, adv, mask, **hp) -> (loss_tok, metrics)`:
- inputs are [B, T]: current log-probs (with grad), old log-probs, the advantage broadcast over
  the tokens of each row, and the 0/1 response mask;
- `loss_tok` [B, T] is per token and is never aggregated here (the composer aggregates it with
  `aggregation.AGG`); masked positions hold finite values;
- `metrics` are detached 0-dim tensors, masked means over `mask` (0 where a denominator is empty):
    clipfrac_high     share of valid tokens with ratio > 1 + eps_high
    clipfrac_low      share of valid tokens with ratio < 1 - eps_low
    clipfrac_pos_adv  share of valid tokens with A > 0 that have ratio > 1 + eps_high
    clipfrac_neg_adv  share of valid tokens with A < 0 that have ratio < 1 - eps_low
  "ratio" is the token ratio r = exp(clamp(logp - old, -20, 20)), except for gspo where it is the
  sequence ratio s_j of the token's row.

Notation: d = logp - old_logp, r = exp(clamp(d, -20, 20)), sg = stop-gradient,
n_j = sum_t m_jt, mean_j(x) = sum_t x_jt m_jt / max(n_j, 1) (row mean over valid tokens).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch

from arena.po.members import Registry

Metrics = dict[str, torch.Tensor]


def check_shapes(logp, old_logp, adv, mask) -> None:
    """Raise ValueError unless the four tensors are [B, T] of one shape."""
    shapes = {"logp": logp.shape, "old_logp": old_logp.shape, "adv": adv.shape, "mask": mask.shape}
    if logp.dim() != 2 or len(set(shapes.values())) != 1:
        named = ", ".join(f"{k}={tuple(v)}" for k, v in shapes.items())
        raise ValueError(f"policy loss: logp, old_logp, adv and mask must share one [B, T] shape; got {named}")


def _row_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    # mean_j(x) = sum_t x m / max(n_j, 1)
    return (x * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)  # [B]


def _pick(cond: torch.Tensor, if_true: float, if_false: float, like: torch.Tensor) -> torch.Tensor:
    """torch.where on two Python scalars, built in `like`'s dtype (no float32 round trip)."""
    as_tensor = lambda v: torch.tensor(v, dtype=like.dtype, device=like.device)  # noqa: E731
    return torch.where(cond, as_tensor(if_true), as_tensor(if_false))


@torch.no_grad()
def _ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    # r = exp(clamp(d, -20, 20)), without a graph
    return (logp - old_logp).clamp_(-20.0, 20.0).exp_()  # [B, T]


@torch.no_grad()
def share_tokens(adv, mask) -> Metrics:
    """The tokens each clip fraction of `clip_metrics` is a share of, as bool [B, T] masks: the
    valid tokens for clipfrac_high/low, those with A > 0 / A < 0 for clipfrac_pos_adv/neg_adv.
    A sum of micro-batch shares weighted by these counts is the share over their union."""
    valid = mask if mask.dtype == torch.bool else mask != 0  # [B, T] bool
    pos = (adv > 0).logical_and_(valid)  # [B, T] valid tokens with A > 0
    neg = (adv < 0).logical_and_(valid)  # [B, T] valid tokens with A < 0
    return {"clipfrac_high": valid, "clipfrac_low": valid, "clipfrac_pos_adv": pos, "clipfrac_neg_adv": neg}


@torch.no_grad()
def clip_metrics(ratio, adv, mask, *, eps_low: float, eps_high: float) -> Metrics:
    """The four clip fractions (module docstring) of a ratio [B, T]; detached 0-dim tensors."""
    of = share_tokens(adv, mask)
    valid, pos, neg = of["clipfrac_high"], of["clipfrac_pos_adv"], of["clipfrac_neg_adv"]  # [B, T] bool each
    high = (ratio > 1 + eps_high).logical_and_(valid)  # [B, T] valid tokens above the band
    low = (ratio < 1 - eps_low).logical_and_(valid)  # [B, T] valid tokens below the band
    counts = torch.stack([
        valid.count_nonzero(), high.count_nonzero(), low.count_nonzero(), pos.count_nonzero(),
        neg.count_nonzero(), high.logical_and_(pos).count_nonzero(), low.logical_and_(neg).count_nonzero(),
    ]).to(ratio.dtype)  # [7]
    n, n_high, n_low, n_pos, n_neg, n_high_pos, n_low_neg = counts
    # share = numerator / denominator, 0 when the denominator is 0
    share = lambda num, den: num / den.clamp(min=1)  # noqa: E731
    return {
        "clipfrac_high": share(n_high, n),
        "clipfrac_low": share(n_low, n),
        "clipfrac_pos_adv": share(n_high_pos, n_pos),
        "clipfrac_neg_adv": share(n_low_neg, n_neg),
    }


def ppo(logp, old_logp, adv, mask, *, eps_low: float = 0.2, eps_high: float = 0.2, clip_c: float = 3.0):
    """Dual-clip PPO (docs/methods.md §5.1, verl "vanilla").

    L1 = -A r, L2 = -A clip(r, 1-eps_low, 1+eps_high), Lc = max(L1, L2),
    L = min(Lc, -A c) if A < 0 else Lc.
    Equivalently (the form computed; c > 1 > 1 - eps_low):
      A > 0:  L = -A min(r, 1+eps_high)
      A < 0:  L = -A clamp(r, 1-eps_low, c)
      A = 0:  L = 0
    The gradient flows through r only inside those bounds. Metrics use r.
    """
    check_shapes(logp, old_logp, adv, mask)
    if not clip_c > 1.0:
        raise ValueError(f"ppo: clip_c must be > 1 (the dual-clip bound), got {clip_c}")
    ratio = (logp - old_logp).clamp(-20.0, 20.0).exp()  # [B, T] r, with grad
    with torch.no_grad():
        negative = adv < 0  # [B, T]
        # per-token bounds: A<0 -> [1-eps_low, c]; A>=0 -> [0, 1+eps_high] (r > 0, so 0 is no bound)
        lower = _pick(negative, 1.0 - eps_low, 0.0, ratio)  # [B, T]
        upper = _pick(negative, clip_c, 1.0 + eps_high, ratio)  # [B, T]
    loss_tok = -adv * ratio.clamp(lower, upper)  # [B, T]
    return loss_tok, clip_metrics(ratio.detach(), adv, mask, eps_low=eps_low, eps_high=eps_high)


def gspo(logp, old_logp, adv, mask, *, eps_low: float = 3e-4, eps_high: float = 4e-4):
    """GSPO, sequence-level ratio clipping (docs/methods.md §5.2, verl 0.9.1 compute_policy_loss_gspo).

    ls_j = mean_j(d) (no ±20 clamp), s_jt = exp(min(logp_t - sg(logp_t) + sg(ls_j), 10)):
    value s_j = exp(min(ls_j, 10)), gradient s_j grad logp_t (0 where ls_j > 10).
    L = max(-A s, -A clip(s, 1-eps_low, 1+eps_high)), no dual clip. Computed as
      A > 0:  -A min(s, 1+eps_high);   A < 0:  -A max(s, 1-eps_low);   A = 0:  0.
    Aggregation is NOT forced (the authors force seq-mean-token-mean; we leave it to AGG).
    Defaults are the authors' ALFWorld bounds 3e-4 / 4e-4; environments override them.
    Metrics use the sequence ratio s_j on every valid token of row j.
    """
    check_shapes(logp, old_logp, adv, mask)
    with torch.no_grad():
        m = mask.to(logp.dtype)  # [B, T]
        seq_log_ratio = _row_mean(logp - old_logp, m).unsqueeze(-1)  # [B, 1] sg(ls_j)
        negative = adv < 0  # [B, T]
        # per-token bounds: A<0 -> [1-eps_low, inf); A>=0 -> [0, 1+eps_high] (s > 0)
        lower = _pick(negative, 1.0 - eps_low, 0.0, logp)  # [B, T]
        upper = _pick(negative, math.inf, 1.0 + eps_high, logp)  # [B, T]
    # log s_jt = logp - sg(logp) + sg(ls_j), clamped above at 10
    seq_ratio = (logp - logp.detach() + seq_log_ratio).clamp(max=10.0).exp()  # [B, T]
    loss_tok = -adv * seq_ratio.clamp(lower, upper)  # [B, T]
    return loss_tok, clip_metrics(seq_ratio.detach(), adv, mask, eps_low=eps_low, eps_high=eps_high)


def cispo(logp, old_logp, adv, mask, *, eps_low: float = 1.0, eps_high: float = 0.2):
    """CISPO, stop-gradient clipped IS weight (docs/methods.md §5.3).

    L = -sg(clip(r, 1-eps_low, 1+eps_high)) A logp; gradient -sg(clip(r)) A grad logp on every
    token (no min/max, so no token loses its gradient). Defaults: the authors' 1.0 / 0.2
    (lower bound 0, i.e. no lower clip). Metrics use r.
    """
    check_shapes(logp, old_logp, adv, mask)
    ratio = _ratio(logp, old_logp)  # [B, T] r, no graph
    with torch.no_grad():
        # w = -sg(clip(r, 1-eps_low, 1+eps_high)) A
        weight = ratio.clamp(1.0 - eps_low, 1.0 + eps_high).mul_(adv).neg_()  # [B, T]
    loss_tok = weight * logp  # [B, T]
    return loss_tok, clip_metrics(ratio, adv, mask, eps_low=eps_low, eps_high=eps_high)


def sapo(
    logp,
    old_logp,
    adv,
    mask,
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
):
    """SAPO, soft gating (docs/methods.md §5.4, the authors' rule).

    tau_j = tau_pos if mean_j(A) > 0 else tau_neg (A = 0 gets tau_neg);
    f = (4 / tau_j) sigmoid(tau_j (r - 1)); L = -f A.
    At r = 1: f = 2 / tau and df/dr = 1, so the gradient equals the plain policy gradient.
    eps_low / eps_high only define the diagnostic clip fractions (of r).
    """
    check_shapes(logp, old_logp, adv, mask)
    ratio = (logp - old_logp).clamp(-20.0, 20.0).exp()  # [B, T] r, with grad
    with torch.no_grad():
        # sign(mean_j(A)) = sign(sum_t A m): the division by n_j is not needed
        adv_sum = (adv * mask.to(adv.dtype)).sum(dim=-1, keepdim=True)  # [B, 1]
        tau = _pick(adv_sum > 0, tau_pos, tau_neg, ratio)  # [B, 1]
        # -(4 / tau) A: the gate's scale times the advantage
        scale = adv * (-4.0 / tau)  # [B, T]
    # f / (4 / tau) = sigmoid(tau r - tau)
    loss_tok = scale * torch.sigmoid(torch.addcmul(-tau, tau, ratio))  # [B, T]
    return loss_tok, clip_metrics(ratio.detach(), adv, mask, eps_low=eps_low, eps_high=eps_high)


CLIP = Registry("clipping", {"ppo": ppo, "gspo": gspo, "cispo": cispo, "sapo": sapo})


def get_clip(name: str) -> Callable[..., tuple[torch.Tensor, Metrics]]:
    """CLIP[name], with a ValueError listing the valid names for an unknown one."""
    return CLIP.member(name)


@torch.no_grad()
def seq_mask(logp, old_logp, adv, mask, delta: Optional[float]) -> torch.Tensor:
    """Sequence mask (docs/methods.md §5.5: the authors' code's sign, not their docstring's).

    Reject row j iff mean_j(A) < 0 AND D_j > delta, where D_j = mean_j(old_logp - logp)
    (unclamped; the k1 estimate of KL(pi_old || pi_theta)): a negative-advantage row whose
    geometric-mean ratio has dropped below exp(-delta). Returns `mask` with the rejected rows
    zeroed (same dtype). delta None or +inf: `mask` unchanged.
    """
    check_shapes(logp, old_logp, adv, mask)
    if delta is None or delta == math.inf:
        return mask
    m = mask.to(logp.dtype)  # [B, T]
    mean_adv = _row_mean(adv, m)  # [B]
    off_policy_kl = _row_mean(old_logp - logp, m)  # [B] D_j
    keep = ~((mean_adv < 0) & (off_policy_kl > delta))  # [B]
    return mask * keep.unsqueeze(-1).to(mask.dtype)  # [B, T]


def no_mask(logp, old_logp, adv, mask):
    """Sequence mask off: every row keeps its tokens (`po.seq_mask=none`)."""
    return mask  # [B, T]


def neg_adv_kl(logp, old_logp, adv, mask, *, seq_mask_delta: float = 3e-3):
    """Sequence mask on (`po.seq_mask=neg_adv_kl`): `seq_mask` with delta = seq_mask_delta.

    The default is the authors' scripts' 3e-3 (their code default was 0.223, about ln 1.25)."""
    if not seq_mask_delta >= 0:
        raise ValueError(f"seq_mask_delta must be >= 0, got {seq_mask_delta}")
    return seq_mask(logp, old_logp, adv, mask, seq_mask_delta)  # [B, T]


# name -> fn(logp, old_logp, adv, mask, **hp) -> the policy-gradient mask [B, T]
SEQ_MASK = Registry("seq_mask", {"none": no_mask, "neg_adv_kl": neg_adv_kl})


@torch.no_grad()
def count_masked(mask_before: torch.Tensor, mask_after: torch.Tensor) -> torch.Tensor:
    """Rows with >= 1 valid token before and none after (the `actor/masked_seqs` metric), int64 []."""
    had = mask_before.sum(dim=-1) > 0  # [B]
    lost = mask_after.sum(dim=-1) == 0  # [B]
    return (had & lost).sum()  # []
