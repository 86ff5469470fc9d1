"""The environment protocol shared by every task.

An environment is a plain Python object:

    reset(seed: int) -> (obs: str, info: dict)
    step(action: str) -> (obs: str, reward: float, done: bool, info: dict)

`info` always carries `won` (bool). Environments with a fixed action set also carry
`admissible_actions` (list[str]). `action` is the text the agent protocol projected out of
`<action>...</action>`; the environment must accept any string without raising on bad input
(an unknown action is a no-op turn that still costs the step reward).

Seeds decide the task, so the n members of a group (same seed) play the same task. Training
seeds are in [0, EVAL_SEED_OFFSET); evaluation seeds are EVAL_SEED_OFFSET + i, so the two sets
never overlap.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable


EVAL_SEED_OFFSET = 1_000_000
VAL_SEED_OFFSET = EVAL_SEED_OFFSET // 2  # 500_000: above any demo seed, below every eval seed


class EnvUnavailableError(RuntimeError):
    """An environment's optional package or data is missing on this machine (CLI exit 2)."""


def eval_seed(i: int) -> int:
    """The i-th held-out evaluation seed (disjoint from every training seed)."""
    return EVAL_SEED_OFFSET + int(i)


def is_eval_seed(seed: int) -> bool:
    return int(seed) >= EVAL_SEED_OFFSET


def step_seeds(seed: int, step: int, try_idx: int, count: int) -> list[int]:
    """Training seeds of one rollout try: a pure function of (run seed, step, try)."""
    import numpy as np  # here, not at the top: the sandbox's tool process imports arena.envs without numpy

    rng = np.random.default_rng([seed, step, try_idx])
    return [int(s) for s in rng.integers(0, EVAL_SEED_OFFSET, size=count)]


@runtime_checkable
class Env(Protocol):
    name: str  # registry name, e.g. "sokoban"
    max_turns: int  # the episode is cut (done=True) after this many steps
    instruction: str  # one-paragraph task description used by the prompt templates

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]: ...

    def is_admissible(self, action: str) -> bool:
        """Whether `action` (already projected out of the tags) is a legal action now."""
        ...

    def expert_action(self) -> Optional[str]:
        """The expert's next action (solver or walkthrough) from the current state, or None."""
        ...
