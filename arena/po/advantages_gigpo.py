"""GiGPO advantage (docs/methods.md §4.2): episode term + anchor-state step term.

A_j = A^E_j + step_w * A^S_j, where A^E is GRPO on `score` and A^S normalises the discounted
step return within the rows of one group that saw exactly the same raw observation.
"""
from __future__ import annotations

import torch

from arena.po.advantages_grpo import check_choice, grpo
from arena.po.members import reads
from arena.po.types import TurnBatch

GIGPO_MODES = ("mean_norm", "mean_std_norm")


def step_returns(batch: TurnBatch, *, gamma: float = 0.95) -> torch.Tensor:
    """The GiGPO step return of every row (docs/design.md, Testbed recipe).

    G_k = sum_{l >= k} gamma^(l-k) * rho_l over the trajectory's turns in turn_idx order
    (rho = turn_reward), minus this turn's own penalty, undiscounted:
    G_k <- G_k - (episode_return_k - score_k)."""
    rewards = batch.turn_reward.to(torch.float64)  # [N]
    returns = torch.zeros_like(rewards)  # [N]
    for rows in batch.trajectory_rows().values():
        # backwards recursion: G_k = rho_k + gamma * G_{k+1}, G_K = 0
        running = 0.0
        for row in reversed(rows):
            running = float(rewards[row]) + gamma * running
            returns[row] = running
    penalty = batch.episode_return.to(torch.float64) - batch.score.to(torch.float64)  # [N]
    return returns - penalty  # [N]


def anchor_groups(batch: TurnBatch) -> torch.Tensor:
    """Step-group id of every row: rows of the same group_id with exactly equal `anchor_obs`
    strings share an id (ids are 0, 1, ... in order of first appearance)."""
    ids: dict[tuple[int, str], int] = {}
    out = [ids.setdefault((g, obs), len(ids)) for g, obs in zip(batch.group_id.tolist(), batch.anchor_obs)]
    return torch.tensor(out, dtype=torch.int64)  # [N]


def step_advantage(returns: torch.Tensor, step_group: torch.Tensor, *, mode: str, eps: float = 1e-6) -> torch.Tensor:
    """A^S_j per anchor-state group s (docs/methods.md §4.2 step 4):

    mean_norm:     A^S_j = G_j - mean_s(G)
    mean_std_norm: A^S_j = (G_j - mean_s(G)) / (std_s(G) + eps), std unbiased
    A singleton group takes mean = its own value and std = 1, so A^S = 0."""
    adv = torch.zeros_like(returns)  # [N]
    for s in torch.unique(step_group).tolist():
        in_group = step_group == s  # [N] bool
        values = returns[in_group]  # [n_s]
        if values.numel() == 1:
            continue  # G - G = 0
        # G_j - mean_s(G), divided by (std_s(G) + eps) in mean_std_norm
        centred = values - values.mean()  # [n_s]
        adv[in_group] = centred / (values.std(correction=1) + eps) if mode == "mean_std_norm" else centred
    return adv  # [N]


@reads("group_id", "traj_id", "turn_idx", "turn_reward", "episode_return", "score", "anchor_obs")
def gigpo(
    batch: TurnBatch,
    *,
    gamma: float = 0.95,
    step_w: float = 1.0,
    mode: str = "mean_std_norm",
    group_stats: str = "pooled_turns",
    eps: float = 1e-6,
) -> torch.Tensor:
    """GiGPO advantage per turn-sample.

    A^E = grpo(score), divided by the std iff mode == "mean_std_norm";
    A^S = step_advantage(step_returns(gamma), anchor_groups, mode);
    A_j = A^E_j + step_w * A^S_j."""
    episode_adv, step_adv = gigpo_terms(batch, gamma=gamma, mode=mode, group_stats=group_stats, eps=eps)  # [N], [N]
    # A_j = A^E_j + step_w * A^S_j
    return (episode_adv + step_w * step_adv).to(batch.score.dtype)  # [N]


def gigpo_terms(batch: TurnBatch, *, gamma: float, mode: str, group_stats: str,
                eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(A^E, A^S) in float64, the two terms `gigpo` adds:
    A^E = grpo(score), divided by the std iff mode == "mean_std_norm";
    A^S = step_advantage(step_returns(gamma), anchor_groups, mode)."""
    check_choice("mode", mode, GIGPO_MODES)
    episode_adv = grpo(batch, group_stats=group_stats, norm_std=mode == "mean_std_norm", eps=eps)  # [N]
    step_adv = step_advantage(step_returns(batch, gamma=gamma), anchor_groups(batch), mode=mode, eps=eps)  # [N]
    return episode_adv.to(torch.float64), step_adv  # [N], [N]


def anchor_repeat_stats(batch: TurnBatch) -> dict[str, float]:
    """How often GiGPO's step-level groups have more than one member (docs/testbed.md, GiGPO).

    repeat_frac     = #{rows j : |S(j)| >= 2} / N, S(j) = the rows of j's group with j's anchor
    multi_traj_frac = #{rows j : S(j) spans >= 2 trajectories} / N
    A row with |S(j)| = 1 gets A^S_j = 0 (step_advantage), so 1 - repeat_frac is the share of
    rows where GiGPO reduces to GRPO's episode term."""
    step_group = anchor_groups(batch)  # [N]
    n = max(1, int(step_group.numel()))
    size = torch.bincount(step_group)  # [n_groups]
    trajs: dict[int, set] = {}
    for s, t in zip(step_group.tolist(), batch.traj_id.tolist()):
        trajs.setdefault(s, set()).add(t)
    multi = torch.tensor([len(trajs.get(s, ())) >= 2 for s in range(int(size.numel()))], dtype=torch.bool)  # [n_groups]
    return {"repeat_frac": float((size[step_group] >= 2).sum()) / n,
            "multi_traj_frac": float(multi[step_group].sum()) / n}


def step_term_stats(batch: TurnBatch, *, gamma: float = 0.95, mode: str = "mean_std_norm",
                    group_stats: str = "pooled_turns", eps: float = 1e-6) -> dict[str, float]:
    """How much GiGPO's step term adds to its episode term on this batch (docs/testbed.md, GiGPO).

    With A^E and A^S as in `gigpo` (same keyword arguments):
    nonzero_frac = #{rows j : A^S_j != 0} / N        (the anchor group's returns differ)
    abs_ratio    = mean_j |A^S_j| / mean_j |A^E_j|   (0 when A^E is all zero)
    corr         = Pearson(A^S, A^E) over all rows   (0 when either is constant)
    A step term that is rarely non-zero, small against A^E, or nearly collinear with it (corr
    near 1) changes the gradient little: GiGPO then behaves like GRPO."""
    episode_adv, step_adv = gigpo_terms(batch, gamma=gamma, mode=mode, group_stats=group_stats, eps=eps)  # [N], [N]
    n = max(1, int(step_adv.numel()))
    episode_abs = float(episode_adv.abs().mean()) if step_adv.numel() else 0.0
    ratio = float(step_adv.abs().mean()) / episode_abs if episode_abs > 0 else 0.0
    # corr = sum (x - x̄)(y - ȳ) / sqrt(sum (x - x̄)^2 * sum (y - ȳ)^2)
    x = step_adv - step_adv.mean()  # [N]
    y = episode_adv - episode_adv.mean()  # [N]
    denom = float((x.pow(2).sum() * y.pow(2).sum()).sqrt())
    corr = float((x * y).sum()) / denom if denom > 0 else 0.0
    return {"nonzero_frac": float((step_adv != 0).sum()) / n, "abs_ratio": ratio, "corr": corr}
