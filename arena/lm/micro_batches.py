"""Micro-batches of a per-turn batch, and padding trimmed to each micro-batch's own longest row
(docs/design.md, "Micro-batches by length").

A turn batch is padded once, to the step's longest prompt (left) and reply (right). With
`sort_micro_batches=false` the trainer cuts it into contiguous micro-batches of `micro_batch_size`
rows, each as wide as the whole batch. With it on (`true`, or the default `auto` under
`po.agg_norm=global`) the rows of each mini-batch are ordered by `sort_keys` (prompt length,
then prompt, then reply length; stable) before they are cut, and each micro-batch drops the columns that
are padding in all of its rows. A row's log-probs do not depend on its neighbours or on padding
(position ids count real tokens, padding is masked out of attention), and under
`po.agg_norm=global` the mini-batch loss is the sum of its micro-batch losses over global
denominators, so the gradient is the same up to float rounding; only the work shrinks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch

from .logprobs import distinct_prompts

Rows = Union[slice, torch.Tensor]  # a contiguous range, or int64 row indices [n_u]


def padding_bounds(prompt_mask: torch.Tensor, response_mask: torch.Tensor) -> tuple[int, int]:
    """(first, last): prompt columns before `first` and response columns from `last` on are
    padding in every row (prompts are left-padded, responses right-padded)."""
    prompt_cols = prompt_mask.bool().any(dim=0)  # [P]
    response_cols = response_mask.bool().any(dim=0)  # [T]
    first = int(prompt_cols.nonzero()[0]) if prompt_cols.any() else prompt_mask.shape[1]
    last = int(response_cols.nonzero()[-1]) + 1 if response_cols.any() else 0
    return first, last


def trim_padding(prompt_ids, prompt_mask, response_ids, response_mask):
    """Drop the columns that are padding in every row (`padding_bounds`). Position ids count real
    tokens and padding is masked out of attention, so log-probs are unchanged up to float
    rounding (tests/bc/test_bc.py, tests/embedded/test_micro_batches.py)."""
    first, last = padding_bounds(prompt_mask, response_mask)
    return (prompt_ids[:, first:], prompt_mask[:, first:],  # [b, P'] x2
            response_ids[:, :last], response_mask[:, :last])  # [b, T'] x2


def row_lengths(prompt_mask: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Real tokens of each row: len_i = sum_p prompt_mask[i, p] + sum_t response_mask[i, t]."""
    return prompt_mask.long().sum(dim=1) + response_mask.long().sum(dim=1)  # [N]


def sort_keys(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """key_i = (p_i * N + g_i) * (T + 1) + r_i, with p_i, r_i row i's prompt and reply tokens and
    g_i < N the index of its distinct prompt (logprobs.distinct_prompts): sorted by it, rows go by
    prompt length, then prompt, then reply length, so a sorted micro-batch holds the repeats that
    the shared-prompt pass (logprobs.py) runs once and stays close to one length."""
    n = prompt_ids.shape[0]
    _, group = distinct_prompts(prompt_ids, prompt_mask)  # [N]
    p_len = prompt_mask.long().sum(dim=1)  # [N]
    r_len = response_mask.long().sum(dim=1)  # [N]
    return (p_len * n + group) * (response_mask.shape[1] + 1) + r_len  # [N]


def micro_batch_rows(rows: slice, size: int, lengths: Optional[torch.Tensor] = None) -> list[Rows]:
    """The micro-batches of the rows `rows` (a mini-batch), `size` rows each (the last may be
    shorter): contiguous slices when `lengths` is None (the default trainer), else the rows
    sorted by `lengths`, any per-row sort key (the trainer's: sort_keys; stable: ties keep batch
    order), then cut."""
    start, stop = rows.start or 0, rows.stop
    if lengths is None:
        return [slice(i, min(i + size, stop)) for i in range(start, stop, size)]
    order = start + torch.argsort(lengths[start:stop], stable=True)  # [n_b] row indices
    return [order[i:i + size] for i in range(0, len(order), size)]


@dataclass
class MicroBatch:
    """One micro-batch's tensors: [n_u, P'] prompts, [n_u, T'] replies and per-token tensors."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    old_logp: Optional[torch.Tensor]
    ref_logp: Optional[torch.Tensor]


def take(batch, rows: Rows, *, trim: bool) -> MicroBatch:
    """The rows `rows` of a TurnBatch, trimmed to their own padding when `trim` (else full width)."""
    p_mask, r_mask = batch.prompt_mask[rows], batch.response_mask[rows]  # [n_u, P], [n_u, T]
    first, last = padding_bounds(p_mask, r_mask) if trim else (0, r_mask.shape[1])

    def per_token(t):  # [N, T] -> [n_u, T']
        return None if t is None else t[rows][:, :last]

    return MicroBatch(
        prompt_ids=batch.prompt_ids[rows][:, first:], prompt_mask=p_mask[:, first:],  # [n_u, P'] x2
        response_ids=batch.response_ids[rows][:, :last], response_mask=r_mask[:, :last],  # [n_u, T'] x2
        old_logp=per_token(batch.old_logp), ref_logp=per_token(batch.ref_logp))
