"""EMPG advantage (docs/methods.md §4.3): GRPO modulated by the old policy's mean token entropy.

A_j <- A^GRPO_j * g_j + zeta * f_{next(j)}, then A <- A - mean_batch(A). The turn index comes
from `batch.turn_idx` (the authors parsed it from the prompt text).
"""
from __future__ import annotations

import torch

from arena.po.advantages_grpo import grpo
from arena.po.members import reads
from arena.po.types import TurnBatch


def entropy_weights(batch: TurnBatch, *, k: float = 1.0, k_f: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The self-calibrating scale g and the clarity term f of every row.

    Hbar_j = sum_t(H_{j,t} m_{j,t}) / max(sum_t m_{j,t}, 1)
    Hn_j   = (Hbar_j - min_batch Hbar) / (max_batch Hbar - min_batch Hbar + 1e-8)
    g_j    = exp(-k Hn_j) / (mean_batch exp(-k Hn) + 1e-8)        (batch mean ~ 1)
    f_j    = exp(-k_f Hn_j)"""
    for name in ("entropy", "response_mask"):
        if getattr(batch, name) is None:
            raise ValueError(f"empg needs TurnBatch.{name} ([N, T]), but it is None; fill it before the advantage")
    mask = batch.response_mask.to(torch.float64)  # [N, T]
    entropy = batch.entropy.to(torch.float64)  # [N, T]
    mean_entropy = (entropy * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # [N]
    lo, hi = mean_entropy.min(), mean_entropy.max()
    norm_entropy = (mean_entropy - lo) / (hi - lo + 1e-8)  # [N]
    g_raw = torch.exp(-k * norm_entropy)  # [N]
    g = g_raw / (g_raw.mean() + 1e-8)  # [N]
    f = torch.exp(-k_f * norm_entropy)  # [N]
    return g, f


def next_turn_rows(batch: TurnBatch) -> torch.Tensor:
    """next(j): the row of the same traj_id with turn_idx + 1, or -1 where there is none."""
    keys = list(zip(batch.traj_id.tolist(), batch.turn_idx.tolist()))
    row_of: dict[tuple[int, int], int] = {}
    for row, key in enumerate(keys):
        if key in row_of:
            raise ValueError(f"TurnBatch: (traj_id, turn_idx) = {key} appears on more than one row")
        row_of[key] = row
    nxt = [row_of.get((traj, turn + 1), -1) for traj, turn in keys]
    return torch.tensor(nxt, dtype=torch.int64)  # [N]


@reads("group_id", "traj_id", "turn_idx", "score", "response_mask", "entropy")
def empg(
    batch: TurnBatch,
    *,
    k: float = 1.0,
    k_f: float = 1.0,
    zeta: float = 0.05,
    group_stats: str = "pooled_turns",
    norm_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """EMPG advantage per turn-sample.

    A_j <- A^GRPO_j * g_j + zeta * f_{next(j)}   (the bonus only where next(j) exists)
    A_j <- A_j - mean_batch(A)"""
    if len(batch) == 0:
        return batch.score.clone()  # [0]
    g, f = entropy_weights(batch, k=k, k_f=k_f)  # [N], [N]
    base = grpo(batch, group_stats=group_stats, norm_std=norm_std, eps=eps).to(torch.float64)  # [N]
    nxt = next_turn_rows(batch)  # [N]
    has_next = nxt >= 0  # [N] bool
    # bonus_j = f_{next(j)} where next(j) exists, else 0
    bonus = torch.where(has_next, f[nxt.clamp(min=0)], torch.zeros_like(f))  # [N]
    # A_j <- A_j g_j + zeta bonus_j, then centre on the batch mean
    adv = base * g + zeta * bonus  # [N]
    return (adv - adv.mean()).to(batch.score.dtype)  # [N]
