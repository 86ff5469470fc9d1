"""KL-to-reference penalty and token entropy (docs/methods.md §9).

Both return per-token values [B, T]; the composer aggregates them with `aggregation.AGG` over the
original response mask.
"""
from __future__ import annotations

import torch


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 ("low_var_kl") estimate of KL(pi_theta || pi_ref) per token.

    delta = clamp(ref_logp - logp, -20, 20); k3 = exp(delta) - delta - 1, clamped to [-10, 10].
    Same value and gradient as verl's `kl_penalty(logp, ref_logp, "low_var_kl")`.
    """
    if logp.shape != ref_logp.shape:
        raise ValueError(
            f"kl_k3: logp and ref_logp must have one shape; got {tuple(logp.shape)} and {tuple(ref_logp.shape)}"
        )
    delta = (ref_logp - logp).clamp(-20.0, 20.0)  # [B, T]
    # k3 = e^delta - delta - 1 (>= 0; the lower clamp never binds)
    return (delta.exp() - delta - 1.0).clamp(-10.0, 10.0)  # [B, T]


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Token entropy H = -sum_v p_v log p_v of softmax(logits), logits [B, T, V] -> [B, T].

    Stable form (as verl.utils.torch_functional.entropy_from_logits):
    H = logsumexp(z) - sum_v softmax(z)_v z_v.
    """
    probs = torch.softmax(logits, dim=-1)  # [B, T, V]
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)  # [B, T]
