"""TurnBatch <-> verl `DataProto` (one verl row per turn-sample; docs/design.md, Per-turn batch).

Layout of the DataProto:
- `non_tensor_batch` (numpy, one entry per row): the row-aligned §F fields under their own
  names (`group_id`, `traj_id`, `turn_idx`, `turn_reward`, `episode_return`, `score`,
  `format_valid`, `action_valid`, `won`, dtype kept), `anchor_obs` and `response_text`
  (object arrays), and verl's `uid` (= str(group_id), so verl's own GRPO groups by task).
- `batch` (TensorDict), under verl's names (TENSOR_KEYS): prompts, prompt_mask, responses,
  response_mask, rollout_log_probs (sampler), old_log_probs, ref_log_prob, entropys.
  Derived, for verl's workers and reward path (ignored on the way back):
      input_ids      = cat(prompts, responses)                                   [N, P+T]
      attention_mask = cat(prompt_mask, response_mask) as int64                  [N, P+T]
      position_ids   = clamp(cumsum(attention_mask) - 1, min=0)                  [N, P+T]
      token_level_scores = token_level_rewards = score at the last valid response token [N, T]
`from_dataproto(to_dataproto(b))` returns every field bit for bit (dtypes included).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import torch
from verl.protocol import DataProto

from arena.po.types import FLAG_FIELDS, ID_FIELDS, REWARD_FIELDS, TurnBatch

ROW_FIELDS = ID_FIELDS + REWARD_FIELDS + FLAG_FIELDS
# TurnBatch tensor field -> verl batch key
TENSOR_KEYS = {
    "prompt_ids": "prompts",
    "prompt_mask": "prompt_mask",
    "response_ids": "responses",
    "response_mask": "response_mask",
    "sampler_logp": "rollout_log_probs",
    "old_logp": "old_log_probs",
    "ref_logp": "ref_log_prob",
    "entropy": "entropys",
}


def _derived(batch: TurnBatch) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    if batch.response_mask is not None:
        mask = batch.response_mask  # [N, T]
        width = mask.shape[1]
        # last valid position: T - 1 - argmax over the flipped mask (0 for an empty row)
        last = (width - 1 - mask.flip(-1).to(torch.float32).argmax(dim=-1)) if width else None  # [N]
        scores = torch.zeros(mask.shape, dtype=torch.float32)  # [N, T]
        if width:
            has_tokens = mask.sum(-1) > 0  # [N]
            rows = torch.arange(len(batch))[has_tokens]  # [n]
            scores[rows, last[has_tokens]] = batch.score[has_tokens].to(torch.float32)
        out["token_level_scores"] = scores  # [N, T]
        out["token_level_rewards"] = scores.clone()  # [N, T]
    parts = (batch.prompt_ids, batch.response_ids, batch.prompt_mask, batch.response_mask)
    if all(p is not None for p in parts):
        out["input_ids"] = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)  # [N, P+T]
        attention = torch.cat([batch.prompt_mask.long(), batch.response_mask.long()], dim=1)  # [N, P+T]
        out["attention_mask"] = attention
        out["position_ids"] = (attention.cumsum(dim=1) - 1).clamp(min=0)  # [N, P+T]
    return out


def to_dataproto(batch: TurnBatch, meta_info: dict | None = None) -> DataProto:
    """One DataProto row per turn-sample (module docstring)."""
    non_tensors = {name: getattr(batch, name).numpy().copy() for name in ROW_FIELDS}
    non_tensors["anchor_obs"] = np.array(list(batch.anchor_obs), dtype=object)
    non_tensors["uid"] = np.array([str(g) for g in batch.group_id.tolist()], dtype=object)
    if batch.response_text:
        non_tensors["response_text"] = np.array(list(batch.response_text), dtype=object)
    tensors = {key: getattr(batch, name) for name, key in TENSOR_KEYS.items() if getattr(batch, name) is not None}
    tensors.update(_derived(batch))
    data = DataProto.from_dict(tensors=tensors or None, non_tensors=non_tensors, meta_info=dict(meta_info or {}))
    return data


def missing_fields(data: DataProto, names: Iterable[str]) -> list[str]:
    """The names (non-tensor fields, or TurnBatch tensor fields by their verl key) not in `data`."""
    have = set(data.non_tensor_batch) | (set(data.batch.keys()) if data.batch is not None else set())
    return [n for n in names if TENSOR_KEYS.get(n, n) not in have]


def from_dataproto(data: DataProto, *, fill_missing: bool = False) -> TurnBatch:
    """The TurnBatch of a DataProto built by `to_dataproto` (or by the agent loop).

    A missing row field raises ValueError naming it, unless `fill_missing` (then zeros / ""),
    which the advantage estimators use after checking their own required fields."""
    nt = data.non_tensor_batch
    n = len(data)
    absent = missing_fields(data, ROW_FIELDS + ("anchor_obs",))
    if absent and not fill_missing:
        raise ValueError(f"DataProto is missing per-turn field(s) {absent}; present: {sorted(nt)}")
    args = {}
    for name in ROW_FIELDS:
        if name in nt:
            args[name] = torch.from_numpy(np.asarray(nt[name]).copy())
        else:
            dtype = torch.int64 if name in ID_FIELDS else torch.float32 if name in REWARD_FIELDS else torch.bool
            args[name] = torch.zeros(n, dtype=dtype)
    args["anchor_obs"] = [str(x) for x in nt["anchor_obs"]] if "anchor_obs" in nt else [""] * n
    args["response_text"] = [str(x) for x in nt["response_text"]] if "response_text" in nt else []
    for name, key in TENSOR_KEYS.items():
        if data.batch is not None and key in data.batch.keys():
            args[name] = data.batch[key]
    return TurnBatch(**args)
