"""The per-turn fan-out: verl's per-prompt generation output -> one actor row per turn.

`ArenaAgentLoop` returns one sample per prompt (verl's `AgentLoopOutput`) whose
`extra_fields["arena_turns"]` / `["arena_episode"]` hold the episode's turns; verl's worker
turns them into the object columns `arena_turns` / `arena_episode` of its per-prompt
`DataProto` (B*n rows, groups of n consecutive rows share `uid`, verl's interleaved repeat).

    turns_from_output(out)  -> TurnBatch   one row per turn: the rows of trajectory j (= row j of
                                           `out`) in turn order; group_id = j // n,
                                           traj_id = j; built by arena.agent.rollout._build_batch,
                                           so score = E_tau - c (1 - v_j) exactly as the
                                           embedded backend computes it
    actor_rows(turns, layout)-> DataProto   dataproto.to_dataproto plus what verl's fit reads
                                           (rm_scores, __num_turns__, multi_modal_inputs), the
                                           rows of each mini-batch of `layout` followed by its
                                           pad rows (mini_batches.mini_batch_layout)
    swap_in(batch, turns, layout)          replaces `batch`'s rows in place (trainer.py)

Padding: verl runs whole micro-batches on every rank, so mini-batch i (turn rows start..stop-1)
gets rows_i - (stop - start) pad rows after its own. A pad row copies a real row of its
mini-batch (same tokens and attention, so verl's no-padding layout stays valid) with
response_mask = 0, scores 0, `arena_pad` = True and a group/trajectory id of its own; its
advantage is 0 (trainer.apply_arena_advantage). It adds nothing to token sums, and the trainer
hands verl seq-mean denominators that count real rows only (mini_batches.py), so it changes no
loss and no gradient. The column `arena_mini_batch` holds each row's mini-batch index.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from verl.protocol import DataProto

from arena.agent.rollout import _build_batch, _Trajectory
from arena.po.types import TurnBatch

from .dataproto import to_dataproto
from .mini_batches import MINI_KEY, MiniBatch

PAD_KEY = "arena_pad"


def _check_groups(uids: list, group_size: int) -> None:
    """Rows j*n .. j*n+n-1 must share one uid and different groups different uids."""
    if group_size < 1 or len(uids) % group_size:
        raise ValueError(f"fan-out: {len(uids)} trajectories is not a multiple of group_size={group_size}")
    firsts = uids[::group_size]
    for j, uid in enumerate(uids):
        if uid != firsts[j // group_size]:
            raise ValueError(f"fan-out: row {j} has uid {uid!r} but its group (rows {j // group_size * group_size}.."
                             f") has {firsts[j // group_size]!r}; expected groups of {group_size} consecutive rows")
    if len(set(firsts)) != len(firsts):
        raise ValueError(f"fan-out: a uid is shared by two groups of {group_size} rows: {firsts}")


def turns_from_records(turn_records: list, episodes: list, *, group_size: int, pad_id: int,
                       first_group_id: int = 0, first_traj_id: int = 0) -> TurnBatch:
    """TurnBatch of B*n trajectories' records (trajectory j: turn_records[j], episodes[j])."""
    if len(turn_records) != len(episodes):
        raise ValueError(f"fan-out: {len(turn_records)} turn lists for {len(episodes)} episodes")
    coefs = {float(e["penalty_coef"]) for e in episodes}
    if len(coefs) > 1:
        raise ValueError(f"fan-out: the episodes disagree on penalty_coef: {sorted(coefs)}")
    trajs = []
    for j, (records, episode) in enumerate(zip(turn_records, episodes)):
        traj = _Trajectory(None, int(episode["seed"]), first_traj_id + j, 0)
        traj.rows = [(r["anchor_obs"], r["turn_reward"], r["format_valid"], r["action_valid"],
                      (r["text"], r["prompt_ids"], r["response_ids"], r["logp"])) for r in records]
        traj.episode_return, traj.won, traj.errored = episode["episode_return"], episode["won"], episode["errored"]
        trajs.append(traj)
    penalty = coefs.pop() if coefs else 0.0
    return _build_batch(trajs, group_size, penalty, pad_id, first_group_id, first_traj_id)


def turns_from_output(out: DataProto, *, group_size: int, pad_id: int) -> TurnBatch:
    """TurnBatch of verl's per-prompt generation output (module docstring)."""
    nt = out.non_tensor_batch
    absent = [k for k in ("arena_turns", "arena_episode", "uid") if k not in nt]
    if absent:
        raise ValueError(f"fan-out: the generation output lacks {absent} (is rollout.agent.default_agent_loop "
                         f"'arena_agent'?); present: {sorted(nt)}")
    _check_groups([str(u) for u in nt["uid"]], group_size)
    return turns_from_records(list(nt["arena_turns"]), list(nt["arena_episode"]), group_size=group_size, pad_id=pad_id)


def pad_rows(turns: TurnBatch, layout: list[MiniBatch]) -> tuple[TurnBatch, torch.Tensor, torch.Tensor]:
    """(the rows of each mini-batch then its pad rows, is_pad [N'] bool, mini-batch index [N']);
    module docstring. The layout must cover the turn rows 0..N-1 in order."""
    covered = [i for mb in layout for i in range(mb.start, mb.stop)]
    if covered != list(range(len(turns))):
        raise ValueError(f"fan-out: the mini-batch layout {layout} does not cover the {len(turns)} turn rows in order")
    order, is_pad, mini = [], [], []
    for index, mb in enumerate(layout):
        real = mb.stop - mb.start
        if mb.rows < real:
            raise ValueError(f"fan-out: mini-batch {mb} has fewer rows than its {real} turn rows")
        order += list(range(mb.start, mb.stop)) + [mb.start + j % real for j in range(mb.rows - real)]
        is_pad += [False] * real + [True] * (mb.rows - real)
        mini += [index] * mb.rows
    is_pad_t = torch.tensor(is_pad, dtype=torch.bool)  # [N']
    mini_t = torch.tensor(mini, dtype=torch.int64)  # [N']
    if not is_pad_t.any():
        return turns.select(order), is_pad_t, mini_t
    padded = turns.select(order)
    k = int(is_pad_t.sum())
    fresh = torch.arange(1, k + 1, dtype=torch.int64)  # [k]
    padded.group_id[is_pad_t] = int(turns.group_id.max()) + fresh  # [k] a group of its own
    padded.traj_id[is_pad_t] = int(turns.traj_id.max()) + fresh  # [k]
    padded.turn_idx[is_pad_t] = 0  # [k]
    for name in ("turn_reward", "episode_return", "score"):
        getattr(padded, name)[is_pad_t] = 0  # [k]
    padded.won[is_pad_t] = False  # [k]
    return padded, is_pad_t, mini_t


def actor_rows(turns: TurnBatch, *, layout: list[MiniBatch] | None = None, row_multiple: int = 1,
               meta_info: dict | None = None) -> DataProto:
    """One DataProto row per turn (+ pad rows), with every §F field and what verl's fit reads.
    Without `layout`: one mini-batch of all rows, padded to a multiple of `row_multiple`."""
    if layout is None:
        n = len(turns)
        layout = [MiniBatch(0, n, math.ceil(n / int(row_multiple)) * int(row_multiple))] if n else []
    padded, is_pad, mini = pad_rows(turns, layout)
    data = to_dataproto(padded, meta_info=meta_info)
    real = (~is_pad).to(torch.float32).unsqueeze(1)  # [N', 1]
    # pad rows: attention kept (valid no-padding layout), loss mask and scores zero
    data.batch["response_mask"] = data.batch["response_mask"] * real  # [N', T]
    for key in ("token_level_scores", "token_level_rewards"):
        data.batch[key] = data.batch[key] * real  # [N', T]
    data.batch["rm_scores"] = data.batch["token_level_scores"].clone()  # [N', T] read by verl's extract_reward
    traj_len = {t: len(rows) for t, rows in padded.trajectory_rows().items()}
    nt = data.non_tensor_batch
    nt[PAD_KEY] = is_pad.numpy().copy()
    nt[MINI_KEY] = mini.numpy().copy()
    nt["__num_turns__"] = np.array([2 * traj_len[t] for t in padded.traj_id.tolist()], dtype=np.int32)
    nt["multi_modal_inputs"] = np.array([{} for _ in range(len(padded))], dtype=object)
    return data


def swap_in(batch: DataProto, turns: TurnBatch, *, layout: list[MiniBatch]) -> DataProto:
    """Replace `batch`'s rows by the per-turn rows, in place (verl's fit keeps the object)."""
    rows = actor_rows(turns, layout=layout)
    batch.batch, batch.non_tensor_batch = rows.batch, rows.non_tensor_batch
    # the per-prompt reward_extra_info columns (e.g. acc) are gone with the per-prompt rows
    batch.meta_info.pop("reward_extra_keys", None)
    return batch


def fan_out(out: DataProto, *, group_size: int, pad_id: int, row_multiple: int = 1) -> DataProto:
    """verl's per-prompt generation output -> the actor's per-turn DataProto."""
    return actor_rows(turns_from_output(out, group_size=group_size, pad_id=pad_id), row_multiple=row_multiple)
