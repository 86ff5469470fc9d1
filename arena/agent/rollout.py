"""The backend-agnostic multi-turn rollout loop that produces the per-turn batch (docs/methods.md §2).

`rollout(envs, seeds, group_size, generate)` plays B = len(seeds) groups of n = group_size
trajectories; the n members of group b all play seeds[b] (env.reset(seeds[b])).

Numbering (documented contract): environment/trajectory slot j = b * n + i (b = group, i =
member). `group_id = first_group_id + b`, `traj_id = first_traj_id + j`. Pass offsets when
several rollouts are concatenated (e.g. dynamic filtering) so the ids stay unique.

Each turn: render one prompt per active env (no growing transcript), ONE batched
`generate(prompts)` call for all of them, project each response, step each env with the
projected action. Only active turns become rows; rows are ordered by (traj_id, turn_idx).

The policy: `generate(prompts: list[str]) -> list[(text, prompt_ids, token_ids, sampler_logp)]`
(docs/design.md §F); ids are int lists or 1-D tensors, `sampler_logp` floats aligned with token_ids
(None is accepted and stored as zeros).

The episode goal is `info["task"]` when the env gives it, else the text after "Your task is
to: " in the reset observation; the prompts keep it after that observation leaves the history.

Environment errors (reset, step or is_admissible raising) are isolated: the message with the
seed goes to `stats["env_errors"]` and `warnings.warn`; that trajectory ends with every
turn_reward 0, episode_return 0 and won False (rows already generated, including the failing
turn, are kept so the batch still reflects what the model did); the others go on.
"""
from __future__ import annotations

import time
import warnings
from itertools import chain
from typing import Callable, Optional, Sequence, Union

import numpy as np
import torch

from arena.agent.projection import project
from arena.agent.prompts import render_prompt, task_from_obs
from arena.po.types import TurnBatch

GenerateFn = Callable[[list], list]
EnvsOrFactory = Union[Sequence, Callable[[], object]]


def select_envs(envs_or_factory: EnvsOrFactory, count: int) -> list:
    """`count` env objects: the first `count` of a list (reused across calls), or fresh ones
    from a `make_env()` callable."""
    if isinstance(envs_or_factory, (list, tuple)):
        if len(envs_or_factory) < count:
            raise ValueError(
                f"rollout needs {count} environments (len(seeds) * group_size), got a list of {len(envs_or_factory)}"
            )
        return list(envs_or_factory[:count])
    if callable(envs_or_factory):
        return [envs_or_factory() for _ in range(count)]
    raise ValueError(f"envs must be a list of env objects or a make_env() callable, got {type(envs_or_factory).__name__}")


class _Trajectory:
    """Mutable state of one trajectory during the loop."""

    __slots__ = ("env", "seed", "traj_id", "limit", "obs", "admissible", "history", "done",
                 "won", "episode_return", "errored", "rows", "env_seconds", "task")

    def __init__(self, env, seed: int, traj_id: int, limit: int):
        self.env, self.seed, self.traj_id, self.limit = env, seed, traj_id, limit
        self.obs, self.admissible, self.history, self.task = "", None, [], ""
        self.done, self.won, self.episode_return, self.errored = False, False, 0.0, False
        self.rows: list[tuple] = []  # (anchor_obs, turn_reward, format_valid, action_valid, out)
        self.env_seconds = 0.0  # time spent inside env.reset / env.step

    def reset(self, errors: list[str]) -> None:
        """env.reset(seed) into obs/admissible/task; a failing env is isolated (_fail)."""
        t0 = time.perf_counter()
        try:
            self.obs, info = self.env.reset(self.seed)
            self.admissible = info.get("admissible_actions")
            self.task = str(info.get("task") or task_from_obs(self.obs))
        except Exception as exc:  # noqa: BLE001 - any env failure is isolated
            _fail(self, "reset", 0, exc, errors)
        self.env_seconds += time.perf_counter() - t0
        if self.limit <= 0:
            self.done = True

    def prompt(self, turn: int, *, history_length: int, template: str) -> str:
        """The prompt of this trajectory's turn `turn` (arena/agent/prompts.py)."""
        return render_prompt(
            getattr(self.env, "name", ""), getattr(self.env, "instruction", ""), self.obs, self.history, turn,
            self.admissible, task=self.task, history_length=history_length, template=template,
        )


def rollout(
    envs: EnvsOrFactory,
    seeds: Sequence[int],
    group_size: int,
    generate: GenerateFn,
    *,
    penalty_coef: float = 0.1,
    history_length: int = 2,
    max_turns: Optional[int] = None,
    pad_id: int = 0,
    template: str = "compact",
    first_group_id: int = 0,
    first_traj_id: int = 0,
) -> tuple[TurnBatch, dict]:
    """Play len(seeds) * group_size trajectories and return (per-turn TurnBatch, stats).

    max_turns: optional cap on top of each env's own `max_turns` (the tighter one wins)."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    env_list = select_envs(envs, len(seeds) * group_size)
    start = time.perf_counter()  # env construction (factory) is not part of the loop's time
    generate_seconds = 0.0
    errors: list[str] = []
    trajs = []
    for j, env in enumerate(env_list):
        seed = int(seeds[j // group_size])
        trajs.append(_Trajectory(env, seed, first_traj_id + j, _turn_limit(env, max_turns)))
    for traj in trajs:
        traj.reset(errors)

    turn = 0
    while True:
        active = [t for t in trajs if not t.done]
        if not active:
            break
        prompts = [t.prompt(turn, history_length=history_length, template=template) for t in active]
        t0 = time.perf_counter()
        outputs = generate(prompts)
        generate_seconds += time.perf_counter() - t0
        if len(outputs) != len(prompts):
            raise ValueError(f"generate returned {len(outputs)} outputs for {len(prompts)} prompts")
        for traj, out in zip(active, outputs):
            _play_turn(traj, out, turn, errors)
        turn += 1

    batch = _build_batch(trajs, group_size, penalty_coef, pad_id, first_group_id, first_traj_id)
    total = time.perf_counter() - start
    stats = _stats(trajs, batch, errors, generate_seconds, total)
    return batch, stats


def _turn_limit(env, max_turns: Optional[int]) -> int:
    env_limit = getattr(env, "max_turns", None)
    limits = [int(x) for x in (env_limit, max_turns) if x is not None]
    if not limits:
        raise ValueError("rollout: the environment has no max_turns and none was given; pass max_turns=")
    return min(limits)


def _fail(traj: _Trajectory, phase: str, turn: int, exc: BaseException, errors: list) -> None:
    message = (f"env error (seed={traj.seed}, traj_id={traj.traj_id}, turn={turn}, {phase}): "
               f"{type(exc).__name__}: {exc}")
    errors.append(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    traj.errored, traj.done, traj.won, traj.episode_return = True, True, False, 0.0


def _play_turn(traj: _Trajectory, out, turn: int, errors: list) -> None:
    """Project one response, step the env, record the row."""
    anchor = traj.obs
    format_valid = action_valid = False
    try:
        projected = project(out[0], traj.env.is_admissible)
        format_valid, action_valid = projected.format_valid, projected.action_valid
        t0 = time.perf_counter()
        obs, reward, done, info = traj.env.step(projected.action)
        traj.env_seconds += time.perf_counter() - t0
        reward, admissible, won = float(reward), info.get("admissible_actions"), bool(info.get("won", False))
    except Exception as exc:  # noqa: BLE001 - any env failure (also a malformed step result) is isolated
        traj.rows.append((anchor, 0.0, format_valid, action_valid, out))
        _fail(traj, "step", turn, exc, errors)
        return
    traj.rows.append((anchor, reward, format_valid, action_valid, out))
    traj.history.append((anchor, projected.action))
    traj.episode_return += reward
    traj.obs, traj.admissible, traj.won = obs, admissible, won
    traj.done = bool(done) or len(traj.rows) >= traj.limit


def _build_batch(trajs, group_size, penalty_coef, pad_id, first_group_id, first_traj_id) -> TurnBatch:
    group_ids, traj_ids, turn_ids, anchors, texts = [], [], [], [], []
    turn_rewards, returns, format_flags, action_flags, won = [], [], [], [], []
    prompts, responses, logps = [], [], []
    for traj in trajs:
        j = traj.traj_id - first_traj_id
        for k, (anchor, reward, fmt, act, out) in enumerate(traj.rows):
            group_ids.append(first_group_id + j // group_size)
            traj_ids.append(traj.traj_id)
            turn_ids.append(k)
            anchors.append(anchor)
            texts.append(out[0] if isinstance(out[0], str) else ("" if out[0] is None else str(out[0])))
            # an errored trajectory ends with zero reward on every turn (sum stays consistent)
            turn_rewards.append(0.0 if traj.errored else reward)
            returns.append(traj.episode_return)
            format_flags.append(fmt)
            action_flags.append(act)
            won.append(traj.won)
            logp = [0.0] * len(out[2]) if out[3] is None else out[3]
            if len(logp) != len(out[2]):
                raise ValueError(f"generate: sampler_logp has {len(logp)} entries for {len(out[2])} tokens")
            prompts.append(out[1])
            responses.append(out[2])
            logps.append(logp)
    episode_return = torch.tensor(returns, dtype=torch.float32)  # [N]
    action_valid = torch.tensor(action_flags, dtype=torch.bool)  # [N]
    # score_j = E_tau - c * (1 - v_j)   (docs/design.md §D; computed once, here)
    score = episode_return - penalty_coef * (1.0 - action_valid.float())  # [N]
    prompt_ids, prompt_mask = _pad(prompts, pad_id, side="left", dtype=torch.long)  # [N, P], [N, P]
    response_ids, response_mask = _pad(responses, pad_id, side="right", dtype=torch.long)  # [N, T], [N, T]
    sampler_logp, _ = _pad(logps, 0.0, side="right", dtype=torch.float32)  # [N, T]
    return TurnBatch(
        group_id=torch.tensor(group_ids, dtype=torch.long),  # [N]
        traj_id=torch.tensor(traj_ids, dtype=torch.long),  # [N]
        turn_idx=torch.tensor(turn_ids, dtype=torch.long),  # [N]
        anchor_obs=anchors,
        turn_reward=torch.tensor(turn_rewards, dtype=torch.float32),  # [N]
        episode_return=episode_return,
        score=score,
        format_valid=torch.tensor(format_flags, dtype=torch.bool),  # [N]
        action_valid=action_valid,
        won=torch.tensor(won, dtype=torch.bool),  # [N]
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask.long(),  # [N, P] 0/1
        response_ids=response_ids,
        response_mask=response_mask.float(),  # [N, T] 0/1
        sampler_logp=sampler_logp,
        response_text=texts,
    )


def _pad(rows: list, value, *, side: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack 1-D rows (int/float lists or 1-D tensors) into [N, W] (W = longest row), padded on
    `side` with `value`; mask 1 on real entries. One tensor conversion for all rows."""
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # [N]
    width = int(lengths.max()) if len(rows) else 0
    position = torch.arange(width).unsqueeze(0)  # [1, W]
    # right padding: real iff position < L_j; left padding: real iff position >= W - L_j
    if side == "right":
        mask = position < lengths.unsqueeze(1)  # [N, W]
    else:
        mask = position >= (width - lengths).unsqueeze(1)  # [N, W]
    padded = torch.full((len(rows), width), value, dtype=dtype)  # [N, W]
    # the True cells of `mask` in row-major order are exactly the concatenated rows
    padded.masked_scatter_(mask, _concat(rows, dtype))  # [sum L_j] -> [N, W]
    return padded, mask


def _concat(rows: list, dtype: torch.dtype) -> torch.Tensor:
    if all(isinstance(r, (list, tuple)) for r in rows):
        np_dtype = np.float32 if dtype.is_floating_point else np.int64
        flat = np.fromiter(chain.from_iterable(rows), dtype=np_dtype)  # [sum L_j] (fast for lists)
        return torch.from_numpy(flat).to(dtype)  # [sum L_j]
    return torch.cat([torch.zeros(0, dtype=dtype)] + [torch.as_tensor(r).reshape(-1).to(dtype) for r in rows])  # [sum L_j]


def _stats(trajs, batch: TurnBatch, errors, generate_seconds: float, total_seconds: float) -> dict:
    n_traj = max(len(trajs), 1)
    n_rows = len(batch)
    lengths = batch.response_mask.sum(dim=1) if n_rows else torch.zeros(0)  # [N]
    return {
        # mean over trajectories of won (last active turn)
        "success_rate": sum(t.won for t in trajs) / n_traj,
        "mean_turns": sum(len(t.rows) for t in trajs) / n_traj,
        "episode_return": sum(t.episode_return for t in trajs) / n_traj,
        # means over turn-samples
        "format_valid_ratio": batch.format_valid.float().mean().item() if n_rows else 0.0,
        "action_valid_ratio": batch.action_valid.float().mean().item() if n_rows else 0.0,
        "response_length": lengths.mean().item() if n_rows else 0.0,
        "n_trajectories": len(trajs),
        "n_turn_samples": n_rows,
        "generate_seconds": generate_seconds,
        # the loop's own time: env calls, prompting, projection, batch building
        "env_seconds": total_seconds - generate_seconds,
        # of which inside env.reset / env.step (the rest is the loop's own overhead)
        "env_call_seconds": sum(t.env_seconds for t in trajs),
        "env_errors": list(errors),
    }
