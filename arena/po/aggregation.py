"""Loss aggregation: per-token loss [B, T] -> scalar (dimension 1, docs/methods.md §6).

Notation: L = loss_tok [B, T], M = mask [B, T] (0/1), n_j = sum_t M_jt (valid tokens of row j),
S = {j : n_j > 0} (rows with at least one valid token; fully masked rows never count).

    token_mean               sum_jt L M / N_tok
    seq_mean_token_mean      sum_{j in S} (sum_t L M / n_j) / N_seq
    seq_mean_token_sum       sum_{j in S}  sum_t L M        / N_seq
    seq_mean_token_sum_norm  sum_{j in S}  sum_t L M        / N_seq / H

Denominators:
- `norm=None` (the authors' per-micro-batch behaviour): N_tok = sum M, N_seq = |S|, H = T of
  the tensor, all taken from `mask` itself.
- `norm=AggNorm.of(full_mini_batch_mask)`: N_tok, N_seq, H are the mini-batch's global counts,
  so the aggregated values of the micro-batches *sum* to the full mini-batch value (gradient
  accumulation without a 1/GA factor). This equals verl 0.9.1 `agg_loss` with dp_size=1,
  batch_num_tokens=N_tok, global_batch_size=N_seq, loss_scale_factor=H.

A zero denominator means the numerator is zero too (no valid token), and the result is 0, not
NaN. Masked positions of L must be finite (they are multiplied by 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from arena.po.members import Registry


@dataclass(frozen=True)
class AggNorm:
    """Global denominators of a whole mini-batch (see the module docstring)."""

    num_tokens: float  # valid tokens of the mini-batch
    num_seqs: float  # rows with >= 1 valid token
    horizon: Optional[float] = None  # H for seq_mean_token_sum_norm; None = padded T of the tensor

    @classmethod
    def of(cls, mask: torch.Tensor, horizon: Optional[float] = None) -> "AggNorm":
        """Counts of a (full mini-batch) mask [B, T]."""
        if mask.dim() != 2:
            raise ValueError(f"AggNorm.of: mask must be [B, T], got shape {tuple(mask.shape)}")
        row_tokens = mask.to(torch.float64).sum(dim=-1)  # [B]
        return cls(
            num_tokens=float(row_tokens.sum()),
            num_seqs=float((row_tokens > 0).sum()),
            horizon=None if horizon is None else float(horizon),
        )


def _safe(denominator):
    """A denominator with 0 replaced by 1 (its numerator is then 0): works for floats and tensors."""
    if isinstance(denominator, torch.Tensor):
        return torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    return denominator if denominator > 0 else 1.0


def _check(loss_tok: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if loss_tok.dim() != 2 or loss_tok.shape != mask.shape:
        raise ValueError(
            f"aggregation: loss_tok and mask must both be [B, T]; got {tuple(loss_tok.shape)} and {tuple(mask.shape)}"
        )
    return mask.to(loss_tok.dtype)  # [B, T]


def token_mean(loss_tok: torch.Tensor, mask: torch.Tensor, *, norm: Optional[AggNorm] = None) -> torch.Tensor:
    """sum_jt L M / N_tok (N_tok = sum M, or norm.num_tokens)."""
    m = _check(loss_tok, mask)  # [B, T]
    # numerator: sum_jt L_jt M_jt
    total = (loss_tok * m).sum()  # []
    num_tokens = m.sum() if norm is None else norm.num_tokens
    return total / _safe(num_tokens)  # []


def _row_sums(loss_tok: torch.Tensor, mask: torch.Tensor):
    """Per-row masked sums and token counts."""
    m = _check(loss_tok, mask)  # [B, T]
    # s_j = sum_t L_jt M_jt ; n_j = sum_t M_jt
    return (loss_tok * m).sum(dim=-1), m.sum(dim=-1)  # [B], [B]


def _num_seqs(row_tokens: torch.Tensor, norm: Optional[AggNorm]):
    # N_seq = |{j : n_j > 0}| (local) or norm.num_seqs (global)
    return (row_tokens > 0).sum().to(row_tokens.dtype) if norm is None else norm.num_seqs


def seq_mean_token_mean(loss_tok: torch.Tensor, mask: torch.Tensor, *, norm: Optional[AggNorm] = None) -> torch.Tensor:
    """sum_{j in S} (s_j / n_j) / N_seq: mean over valid rows of each row's token mean."""
    row_sum, row_tokens = _row_sums(loss_tok, mask)  # [B], [B]
    # s_j / max(n_j, 1): an empty row has s_j = 0 and adds 0
    row_mean = row_sum / _safe(row_tokens)  # [B]
    return row_mean.sum() / _safe(_num_seqs(row_tokens, norm))  # []


def seq_mean_token_sum(loss_tok: torch.Tensor, mask: torch.Tensor, *, norm: Optional[AggNorm] = None) -> torch.Tensor:
    """sum_{j in S} s_j / N_seq: mean over valid rows of each row's token sum."""
    row_sum, row_tokens = _row_sums(loss_tok, mask)  # [B], [B]
    return row_sum.sum() / _safe(_num_seqs(row_tokens, norm))  # []


def seq_mean_token_sum_norm(
    loss_tok: torch.Tensor, mask: torch.Tensor, *, norm: Optional[AggNorm] = None
) -> torch.Tensor:
    """seq_mean_token_sum / H, with H = norm.horizon, or the padded T of the tensor when unset."""
    horizon = mask.shape[-1] if norm is None or norm.horizon is None else norm.horizon
    return seq_mean_token_sum(loss_tok, mask, norm=norm) / horizon  # []


# `norm` is supplied by the caller at run time: not a hyperparameter
AGG = Registry(
    "aggregation",
    {
        "token_mean": token_mean,
        "seq_mean_token_mean": seq_mean_token_mean,
        "seq_mean_token_sum": seq_mean_token_sum,
        "seq_mean_token_sum_norm": seq_mean_token_sum_norm,
    },
    runtime_args=("norm",),
)

def get_agg(name: str) -> Callable[..., torch.Tensor]:
    """AGG[name], with a ValueError listing the valid names for an unknown one."""
    return AGG.member(name)
