"""Trajectory filtering (dimension 3): the `FILTER` registry and the resampling loop.

A filter is the pure selection step of one rollout try (docs/methods.md §7):

    fn(group_id [M], key [M], *, needed_groups, last_try, **hp) -> list of group ids to keep

with one entry per trajectory of the try (its group and its filter value). `collect_groups`
runs the whole loop over a `rollout(try_idx) -> TurnBatch` callable.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from arena.po.members import Registry
from arena.po.types import TurnBatch

FILTER_KEYS = ("episode_return", "won")


def _as_list(values) -> list:
    return values.tolist() if isinstance(values, torch.Tensor) else list(values)


def _groups_in_order(group_id: list) -> list:
    """Distinct group ids in order of first appearance."""
    return list(dict.fromkeys(group_id))


def _check_counts(group_id: list, key: list, needed_groups: int) -> None:
    if len(group_id) != len(key):
        raise ValueError(f"filter: group_id has {len(group_id)} entries but key has {len(key)}; need one per trajectory")
    if needed_groups < 0:
        raise ValueError(f"filter: needed_groups must be >= 0, got {needed_groups}")


def check_dynamic_hp(*, filter_key: str, max_gen_batches: int, cold_start_steps: int) -> None:
    if filter_key not in FILTER_KEYS:
        raise ValueError(f"filter_key={filter_key!r} is not valid; choose one of {list(FILTER_KEYS)}")
    if int(max_gen_batches) < 1:
        raise ValueError(f"max_gen_batches must be >= 1, got {max_gen_batches}")
    if int(cold_start_steps) < 0:
        raise ValueError(f"cold_start_steps must be >= 0, got {cold_start_steps}")


def none(group_id: Sequence, key: Sequence, *, needed_groups: int, last_try: bool) -> list:
    """No filtering: the first `needed_groups` groups, in order."""
    group_id, key = _as_list(group_id), _as_list(key)
    _check_counts(group_id, key, needed_groups)
    return _groups_in_order(group_id)[:needed_groups]


def dynamic(
    group_id: Sequence,
    key: Sequence,
    *,
    needed_groups: int,
    last_try: bool,
    filter_key: str = "episode_return",
    max_gen_batches: int = 3,
    cold_start_steps: int = 0,
) -> list:
    """DAPO dynamic sampling for agents (docs/methods.md §7).

    A group is uniform iff every trajectory's key equals the first one (exact equality).
    keep = non-uniform groups in order; on the last try, then the uniform groups in order;
    truncated to `needed_groups`. (filter_key, max_gen_batches and cold_start_steps are read by
    the loop, `collect_groups`; they are in the signature so configs can be checked against it.)"""
    check_dynamic_hp(filter_key=filter_key, max_gen_batches=max_gen_batches, cold_start_steps=cold_start_steps)
    group_id, key = _as_list(group_id), _as_list(key)
    _check_counts(group_id, key, needed_groups)
    values: dict = {}
    for g, v in zip(group_id, key):
        values.setdefault(g, []).append(v)
    uniform = {g: all(v == vs[0] for v in vs) for g, vs in values.items()}
    order = _groups_in_order(group_id)
    keep = [g for g in order if not uniform[g]]
    if last_try:
        keep += [g for g in order if uniform[g]]
    return keep[:needed_groups]


# name -> fn(group_id [M], key [M], *, needed_groups, last_try, **hp) -> kept group ids
# (needed_groups and last_try have no default, so they are not hyperparameters)
FILTER = Registry("filtering", {"none": none, "dynamic": dynamic})


def filter_hp_names(name: str) -> tuple[str, ...]:
    """The hyperparameters a filter accepts (its defaulted keyword arguments)."""
    return tuple(FILTER.hyperparameters(name))


def _trajectory_values(batch: TurnBatch, filter_key: str) -> tuple[list, list, list]:
    """Per trajectory (in order of first row): its group id, filter value and won flag, read
    from the trajectory's last turn (the values are repeated on every row: docs/design.md, Per-turn batch)."""
    group_id, key, won = [], [], []
    values = getattr(batch, filter_key).to(torch.float64)  # [N]
    for rows in batch.trajectory_rows().values():
        last = rows[-1]
        group_id.append(int(batch.group_id[last]))
        key.append(float(values[last]))
        won.append(bool(batch.won[last]))
    return group_id, key, won


def _renumber(batch: TurnBatch, group_offset: int, traj_offset: int) -> TurnBatch:
    """Give the kept groups ids group_offset, group_offset+1, ... (in row order of first
    appearance) and the trajectories traj_offset, ..., so ids from different tries never collide."""
    new_group = {g: group_offset + i for i, g in enumerate(_groups_in_order(batch.group_id.tolist()))}
    new_traj = {t: traj_offset + i for i, t in enumerate(dict.fromkeys(batch.traj_id.tolist()))}
    batch.group_id = torch.tensor([new_group[g] for g in batch.group_id.tolist()], dtype=torch.int64)  # [N']
    batch.traj_id = torch.tensor([new_traj[t] for t in batch.traj_id.tolist()], dtype=torch.int64)  # [N']
    return batch


def collect_groups(
    rollout: Callable[[int], TurnBatch], filter_name: str, *, needed_groups: int, step: int, **hp
) -> tuple[TurnBatch, dict]:
    """Run rollout tries until `needed_groups` groups are kept (docs/methods.md §7).

    Filtering is on iff step > cold_start_steps (0 for members without it); then up to
    max_gen_batches tries are made (1 for members without it), otherwise one try through `none`. Returns the kept rows (groups in keep order,
    ids renumbered 0.. across tries) and stats:
      kept_group_frac  = kept groups / all sampled groups
      tries            = rollouts made
      all_success_rate = mean won over ALL sampled trajectories (docs/methods.md §7)
      sampled_groups, kept_groups, sampled_trajectories."""
    params = FILTER.with_defaults(filter_name, hp)
    # a call on an empty try checks the member's hyperparameters before any rollout
    FILTER[filter_name]([], [], needed_groups=0, last_try=True, **params)
    filter_key = params.get("filter_key", "episode_return")
    # the loop's own knobs, read from whichever member declares them (the `none` member has neither)
    filtering_on = step > int(params.get("cold_start_steps", 0))
    max_tries = int(params.get("max_gen_batches", 1)) if filtering_on else 1
    select = FILTER[filter_name] if filtering_on else FILTER["none"]
    select_hp = params if filtering_on else {}

    kept_parts: list[TurnBatch] = []
    n_kept = n_sampled_groups = n_kept_traj = 0
    won_all: list[bool] = []
    tries = 0
    last_batch = None
    for try_idx in range(max_tries):
        batch = last_batch = rollout(try_idx)
        tries += 1
        group_id, key, won = _trajectory_values(batch, filter_key)
        won_all += won
        n_sampled_groups += len(set(group_id))
        keep = select(
            group_id, key, needed_groups=needed_groups - n_kept, last_try=try_idx == max_tries - 1, **select_hp
        )
        # rows of the kept groups, group by group in keep order
        rows = [r for g in keep for r in (batch.group_id == g).nonzero(as_tuple=True)[0].tolist()]
        if rows:
            part = _renumber(batch.select(rows), n_kept, n_kept_traj)
            n_kept_traj += len(set(part.traj_id.tolist()))
            kept_parts.append(part)
        n_kept += len(keep)
        if n_kept >= needed_groups:
            break

    if kept_parts:
        out = TurnBatch.cat(kept_parts)
    else:
        out = last_batch.select([])  # no group kept: an empty batch
    stats = {
        "kept_group_frac": n_kept / n_sampled_groups if n_sampled_groups else 0.0,
        "tries": tries,
        "all_success_rate": sum(won_all) / len(won_all) if won_all else 0.0,
        "sampled_groups": n_sampled_groups,
        "kept_groups": n_kept,
        "sampled_trajectories": len(won_all),
    }
    return out, stats
