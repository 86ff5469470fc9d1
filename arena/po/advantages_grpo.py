"""GRPO advantage (docs/methods.md §4.1): the group normalisation that GiGPO and EMPG build on.

Kept apart from the registry in `advantages.py` so that `advantages_gigpo` and
`advantages_empg` import it without an import cycle.
"""
from __future__ import annotations

from typing import Sequence

import torch

from arena.po.members import reads
from arena.po.types import TurnBatch

GROUP_STATS = ("pooled_turns", "per_trajectory")


def check_choice(option: str, value, valid: Sequence[str]) -> None:
    """Raise ValueError listing the valid values when `value` is not one of them."""
    if value not in valid:
        raise ValueError(f"{option}={value!r} is not valid; choose one of {list(valid)}")


def group_normalise(
    values: torch.Tensor,
    group_id: torch.Tensor,
    traj_id: torch.Tensor,
    *,
    group_stats: str = "pooled_turns",
    norm_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Normalise `values` [N] within each group of `group_id` (docs/methods.md §4.1).

    Group elements:
      pooled_turns:   every row of the group is one element (the authors' cross-step default);
      per_trajectory: each trajectory of the group is one element, the mean of its rows
                      (the authors' vanilla_grpo).
    mu_g = mean(elements), sigma_g = unbiased std(elements); a group of one element has
    mu_g = 0, sigma_g = 1 (as the authors).
    A_j = (v_j - mu_g) / (sigma_g + eps) if norm_std else v_j - mu_g, for every row j of g."""
    check_choice("group_stats", group_stats, GROUP_STATS)
    v = values.to(torch.float64)  # [N]
    adv = torch.zeros_like(v)  # [N]
    for g in torch.unique(group_id).tolist():
        in_group = group_id == g  # [N] bool
        # the group's elements: its rows, or one mean per trajectory
        if group_stats == "pooled_turns":
            elements = v[in_group]  # [n_rows_g]
        else:
            trajs = torch.unique(traj_id[in_group])  # [n_traj_g]
            elements = torch.stack([v[in_group & (traj_id == t)].mean() for t in trajs.tolist()])  # [n_traj_g]
        # mu_g, sigma_g (unbiased); one element: mu_g = 0, sigma_g = 1
        if elements.numel() == 1:
            mu, sigma = 0.0, 1.0
        else:
            mu, sigma = elements.mean(), elements.std(correction=1)
        # A_j = (v_j - mu_g) / (sigma_g + eps)  or  v_j - mu_g
        centred = v[in_group] - mu  # [n_rows_g]
        adv[in_group] = centred / (sigma + eps) if norm_std else centred
    return adv.to(values.dtype)  # [N]


def check_trajectories_in_one_group(batch: TurnBatch) -> None:
    """Every trajectory must sit in exactly one group (its rows share group_id)."""
    pairs = torch.unique(torch.stack([batch.traj_id, batch.group_id]), dim=1)  # [2, n_pairs]
    if pairs.shape[1] != torch.unique(batch.traj_id).numel():
        raise ValueError("TurnBatch: a traj_id appears under more than one group_id")


@reads("group_id", "traj_id", "score")
def grpo(batch: TurnBatch, *, group_stats: str = "pooled_turns", norm_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantage of each turn-sample: its `score` (penalty included) normalised in its group.

    A_j = (R_j - mu_g) / (sigma_g + eps)   (or R_j - mu_g when norm_std is False),
    with the group statistics of `group_normalise`."""
    if len(batch) == 0:
        return batch.score.clone()  # [0]
    check_trajectories_in_one_group(batch)
    return group_normalise(
        batch.score, batch.group_id, batch.traj_id, group_stats=group_stats, norm_std=norm_std, eps=eps
    )  # [N]
