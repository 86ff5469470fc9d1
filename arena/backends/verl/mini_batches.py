"""verl's actor update cut into the embedded backend's mini-batches (docs/verl.md, Mini-batches).

The embedded backend (arena/backends/embedded/update.py) splits a step's N turn rows, in turn
order, into the slices of `mini_batch_slices` (k near-equal parts, or parts of s turn-samples),
and normalises each slice b by its own counts:
    N_tok(b) = valid response tokens of b,   N_seq(b) = rows of b with >= 1 valid token.

verl 0.9.1's `_update_actor` hands its workers the whole step with one mini-batch size and one
`global_batch_size` (ppo_mini_batch_size * rollout.n rows); the engine counts N_tok itself per
mini-batch (all-reduce of the loss mask), but every seq-mean aggregation divides by that fixed
global_batch_size (core_algos.agg_loss). Two things follow when the rows must be padded to whole
micro-batches: a pad row (zero mask) counts in that denominator, and mini-batches cut at fixed
row counts hold other rows than the embedded slices. So, through verl's own hooks:

    mini_batch_layout(N, k | s, unit) -> [MiniBatch(start, stop, rows)]
        slice i of the embedded split, rows = ceil((stop - start) / unit) * unit (its pad rows
        follow it, unit = micro-batch rows x data-parallel ranks, so every rank runs whole
        micro-batches);
    the trainer calls verl's `_update_actor` once per mini-batch and epoch, in the embedded
    order (epoch-major), through `OneMiniBatchUpdate`, which sets the update's non-tensor
        mini_batch_size = rows,  epochs = 1,  global_batch_size = N_seq(b) (`rows_with_tokens`),
    so verl's seq-mean denominators count real rows only and a pad row changes no loss and no
    gradient (its terms are zero; token sums never counted it);
    merge_update_outputs concatenates the calls' per-mini-batch metric lists, as one verl
    call over all mini-batches would have returned them.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
import torch
from verl.protocol import DataProto
from verl.utils import tensordict_utils as tu

from arena.po.batching import mini_batch_slices

# non-tensor column: the index of the row's mini-batch in the step's layout
MINI_KEY = "arena_mini_batch"


class MiniBatch(NamedTuple):
    start: int  # first turn row (turn order) of the embedded slice
    stop: int  # one past its last turn row
    rows: int  # its rows on verl, pad rows included (a multiple of the unit)


def mini_batch_layout(n_rows: int, *, num_mini_batches: int, mini_batch_turns: Optional[int],
                      unit: int) -> list[MiniBatch]:
    """The embedded slices of N = n_rows turn rows, each padded to a multiple of `unit` rows:
        rows_i = ceil((stop_i - start_i) / unit) * unit."""
    unit = int(unit)
    if unit < 1:
        raise ValueError(f"mini_batch_layout: unit must be >= 1, got {unit}")
    slices = mini_batch_slices(int(n_rows), num_mini_batches=int(num_mini_batches), mini_batch_size=mini_batch_turns)
    return [MiniBatch(s.start, s.stop, math.ceil((s.stop - s.start) / unit) * unit) for s in slices]


def rows_by_mini_batch(batch: DataProto) -> list:
    """The row indices of each mini-batch of a swapped-in step, in layout order (MINI_KEY)."""
    mini = np.asarray(batch.non_tensor_batch[MINI_KEY])  # [N']
    return [np.flatnonzero(mini == index) for index in np.unique(mini)]


def rows_with_tokens(response_mask: torch.Tensor) -> int:
    """N_seq = the rows with >= 1 valid response token (pad rows have none), at least 1 (an
    all-empty mini-batch then has a zero numerator, as the embedded `_safe` denominator)."""
    return max(1, int((response_mask.sum(dim=-1) > 0).sum()))  # response_mask [n, T] -> []


class OneMiniBatchUpdate:
    """The actor worker group as verl's `_update_actor` sees it for one mini-batch: its
    `update_actor` overwrites the sizes verl derived from the config (module docstring);
    every other attribute is the worker group's."""

    def __init__(self, worker_group, *, rows: int, seqs: int):
        self.worker_group, self.rows, self.seqs = worker_group, int(rows), int(seqs)

    def update_actor(self, batch_td):
        tu.assign_non_tensor(batch_td, mini_batch_size=self.rows, global_batch_size=self.seqs, epochs=1)
        return self.worker_group.update_actor(batch_td)

    def __getattr__(self, name):
        return getattr(self.worker_group, name)


def merge_update_outputs(outputs: list[DataProto]) -> DataProto:
    """One `_update_actor` output from several: each metric's per-mini-batch list, concatenated
    in call order (verl's fit then reduces the lists as usual)."""
    merged: dict[str, list] = {}
    for out in outputs:
        for key, value in out.meta_info["metrics"].items():
            merged.setdefault(key, []).extend(value if isinstance(value, list) else [value])
    return DataProto.from_single_dict(data={}, meta_info={"metrics": merged})
