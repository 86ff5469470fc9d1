"""The per-turn batch: the one type that environments, trainers and verl exchange.

Contract: docs/design.md, Per-turn batch. One row per turn-sample (one LLM call of one
trajectory), N rows. The rollout loop fills the ids, rewards and flags; the backends fill the
[N, T] tensors (T = padded response length; prompt tensors use their own padded length P).

Conventions fixed here so that every part agrees:
- `episode_return` and `won` are trajectory-level values repeated on every row of the trajectory.
- `turn_reward` is the environment reward of that turn only.
- `score = episode_return - penalty_coef * (1 - action_valid)` (docs/design.md, Testbed recipe), computed once by
  the rollout loop. GiGPO recovers the per-turn penalty as `episode_return - score`.
- Response tensors are right-padded; `response_mask` is 1 on real response tokens.
- Prompt tensors are left-padded (the generation convention); `prompt_mask` is 1 on real tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional, Sequence

import torch

# Row-aligned fields that every batch has (filled by the rollout loop).
ID_FIELDS = ("group_id", "traj_id", "turn_idx")
REWARD_FIELDS = ("turn_reward", "episode_return", "score")
FLAG_FIELDS = ("format_valid", "action_valid", "won")
# [N, T] / [N, P] tensors filled by the backends; None until filled.
TENSOR_FIELDS = (
    "prompt_ids",
    "prompt_mask",
    "response_ids",
    "response_mask",
    "sampler_logp",
    "old_logp",
    "ref_logp",
    "entropy",
)


@dataclass
class TurnBatch:
    # ids
    group_id: torch.Tensor  # [N] int64: the task group (the n rollouts of one seed share it)
    traj_id: torch.Tensor  # [N] int64: the trajectory (unique across the batch)
    turn_idx: torch.Tensor  # [N] int64: 0-based turn index inside the trajectory
    anchor_obs: list  # [N] str: the raw environment observation at that turn (GiGPO anchor)
    # rewards
    turn_reward: torch.Tensor  # [N] float: environment reward of this turn
    episode_return: torch.Tensor  # [N] float: sum of the trajectory's turn rewards
    score: torch.Tensor  # [N] float: episode_return - penalty_coef * (1 - action_valid)
    # flags
    format_valid: torch.Tensor  # [N] bool: exactly one <think>..</think><action>..</action>
    action_valid: torch.Tensor  # [N] bool: format-valid AND an admissible action
    won: torch.Tensor  # [N] bool: the trajectory was won (repeated per row)
    # backend tensors
    prompt_ids: Optional[torch.Tensor] = None  # [N, P] int64, left-padded
    prompt_mask: Optional[torch.Tensor] = None  # [N, P] 0/1
    response_ids: Optional[torch.Tensor] = None  # [N, T] int64, right-padded
    response_mask: Optional[torch.Tensor] = None  # [N, T] 0/1 float
    sampler_logp: Optional[torch.Tensor] = None  # [N, T] float: log-probs from the sampler
    old_logp: Optional[torch.Tensor] = None  # [N, T] float: recomputed by the training model
    ref_logp: Optional[torch.Tensor] = None  # [N, T] float: reference (BC) model
    entropy: Optional[torch.Tensor] = None  # [N, T] float: old-policy token entropy
    # free-form per-row text kept for debugging/dumps (not used by any loss)
    response_text: list = field(default_factory=list)  # [N] str (may be empty)

    def __post_init__(self) -> None:
        self.validate()

    def __len__(self) -> int:
        return int(self.group_id.shape[0])

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise ValueError naming the first field whose shape disagrees with N."""
        n = int(self.group_id.shape[0])
        for name in ID_FIELDS + REWARD_FIELDS + FLAG_FIELDS:
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.shape[0] != n:
                shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"TurnBatch.{name}: expected a 1-D tensor of length N={n}, got {shape}")
        if len(self.anchor_obs) != n:
            raise ValueError(f"TurnBatch.anchor_obs: expected {n} entries, got {len(self.anchor_obs)}")
        if self.response_text and len(self.response_text) != n:
            raise ValueError(f"TurnBatch.response_text: expected {n} entries, got {len(self.response_text)}")
        width = {}
        for name in TENSOR_FIELDS:
            t = getattr(self, name)
            if t is None:
                continue
            if t.dim() != 2 or t.shape[0] != n:
                raise ValueError(f"TurnBatch.{name}: expected shape [N={n}, T], got {tuple(t.shape)}")
            kind = "P" if name.startswith("prompt") else "T"
            if width.setdefault(kind, t.shape[1]) != t.shape[1]:
                raise ValueError(
                    f"TurnBatch.{name}: width {t.shape[1]} differs from the other [N, {kind}] tensors ({width[kind]})"
                )

    # ------------------------------------------------------------------ row ops
    def select(self, rows: torch.Tensor | Sequence[int]) -> "TurnBatch":
        """A new batch with the given rows (an index tensor/list or a bool mask [N])."""
        idx = torch.as_tensor(rows)
        if idx.dtype == torch.bool:
            idx = idx.nonzero(as_tuple=True)[0]  # [N'] int64
        idx = idx.long()
        picked = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                picked[f.name] = v[idx]
            elif isinstance(v, list):
                picked[f.name] = [v[i] for i in idx.tolist()] if v else []
            else:
                picked[f.name] = v
        return TurnBatch(**picked)

    @staticmethod
    def cat(batches: Sequence["TurnBatch"]) -> "TurnBatch":
        """Concatenate batches row-wise. Backend tensors must be all present or all absent;
        [N, T] tensors of different widths are right-padded with 0 (prompts left-padded)."""
        if not batches:
            raise ValueError("TurnBatch.cat: need at least one batch")
        out = {}
        for f in fields(TurnBatch):
            vals = [getattr(b, f.name) for b in batches]
            if f.name in TENSOR_FIELDS:
                present = [v is not None for v in vals]
                if not any(present):
                    out[f.name] = None
                    continue
                if not all(present):
                    raise ValueError(f"TurnBatch.cat: {f.name} is set in some batches and None in others")
                width = max(v.shape[1] for v in vals)
                left = f.name.startswith("prompt")
                padded = [_pad_width(v, width, left=left) for v in vals]
                out[f.name] = torch.cat(padded, dim=0)  # [sum N, width]
            elif isinstance(vals[0], torch.Tensor):
                out[f.name] = torch.cat(vals, dim=0)  # [sum N]
            else:
                if f.name == "response_text" and not all(len(v) == len(b) for v, b in zip(vals, batches)):
                    out[f.name] = []
                else:
                    out[f.name] = [x for v in vals for x in v]
        return TurnBatch(**out)

    def trajectory_rows(self) -> dict[int, list[int]]:
        """traj_id -> row indices in turn order."""
        order: dict[int, list[int]] = {}
        for row, (t, k) in enumerate(zip(self.traj_id.tolist(), self.turn_idx.tolist())):
            order.setdefault(t, []).append((k, row))
        return {t: [r for _, r in sorted(v)] for t, v in order.items()}


def _pad_width(t: torch.Tensor, width: int, *, left: bool) -> torch.Tensor:
    extra = width - t.shape[1]
    if extra == 0:
        return t
    pad = torch.zeros(t.shape[0], extra, dtype=t.dtype, device=t.device)  # [N, extra]
    return torch.cat([pad, t], dim=1) if left else torch.cat([t, pad], dim=1)  # [N, width]


def make_batch(**kw) -> TurnBatch:
    """Build a TurnBatch from plain Python lists (tests, scripted rollouts).

    Required keys: group_id, traj_id, turn_idx, turn_reward, episode_return, score,
    format_valid, action_valid, won. `anchor_obs` defaults to "" per row."""
    n = len(kw["group_id"])
    args = {}
    for name in ID_FIELDS:
        args[name] = torch.as_tensor(kw.pop(name), dtype=torch.int64)
    for name in REWARD_FIELDS:
        args[name] = torch.as_tensor(kw.pop(name), dtype=torch.float64 if kw.get("float64") else torch.float32)
    for name in FLAG_FIELDS:
        args[name] = torch.as_tensor(kw.pop(name), dtype=torch.bool)
    kw.pop("float64", None)
    args["anchor_obs"] = list(kw.pop("anchor_obs", [""] * n))
    args.update(kw)
    return TurnBatch(**args)
