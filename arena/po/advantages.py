"""Advantage design (dimension 4): the `ADV` registry (docs/methods.md §4).

Every advantage function has the signature `fn(batch: TurnBatch, **hp) -> adv [N]`: one float
advantage per turn-sample, which the backends spread over the response tokens with
`broadcast`. Hyperparameters are keyword arguments with the authors' defaults; each member
declares the TurnBatch fields it reads with `@reads` (arena.po.members). GRPO lives in
`advantages_grpo.py`, GiGPO and EMPG in `advantages_gigpo.py` and `advantages_empg.py`.
"""
from __future__ import annotations

from typing import Callable

import torch

from arena.po.advantages_empg import empg
from arena.po.advantages_gigpo import gigpo
from arena.po.advantages_grpo import GROUP_STATS, check_choice, check_trajectories_in_one_group, group_normalise, grpo
from arena.po.members import Registry

__all__ = ["ADV", "GROUP_STATS", "broadcast", "check_choice", "check_trajectories_in_one_group", "get_advantage",
           "group_normalise", "grpo"]


def broadcast(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Spread one advantage per sample over its response tokens.

    A_{j,t} = A_j * m_{j,t}"""
    if adv.dim() != 1 or mask.dim() != 2 or mask.shape[0] != adv.shape[0]:
        raise ValueError(f"broadcast: expected adv [N] and mask [N, T], got {tuple(adv.shape)} and {tuple(mask.shape)}")
    return adv.unsqueeze(-1) * mask.to(adv.dtype)  # [N, T]


# name -> fn(batch, **hp) -> adv [N]; `eps` is a numerical guard, not a hyperparameter
ADV = Registry("advantage", {"grpo": grpo, "gigpo": gigpo, "empg": empg}, runtime_args=("eps",))


def get_advantage(name: str) -> Callable[..., torch.Tensor]:
    """The advantage function registered under `name` (ValueError lists the names)."""
    return ADV.member(name)
