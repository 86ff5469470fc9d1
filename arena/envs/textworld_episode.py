"""One TextWorld game played turn by turn: the episode loop shared by household and alfworld.

Both tasks are textworld games with an admissible-command list, so they share the same rules
(docs/methods.md §3, ALFWorld):
- reward = win_reward * won, paid once, on the turn the game is won (ALFWorld: 10 * won);
- an action is admissible iff its lowercased, stripped text is in the lowercased admissible list;
- a non-admissible action is a no-op turn: the game is not stepped and the observation is
  "Nothing happens." (what ALFWorld's textworld env answers);
- the episode ends when the game is won or lost, or after max_turns turns (cut, won=False).

The expert follows a plan (the game's walkthrough, or `plan_fn(state)` when none is known) and
re-plans with `plan_fn` as soon as the agent takes an admissible action that is not the plan's
next step.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Optional

from .textworld_reset import reset_game

NO_OP_FEEDBACK = "Nothing happens."

# Per-process cache of loaded textworld envs, keyed by game file. Starting one costs ~0.3 s
# (jericho copies its interpreter library); resetting a loaded one costs a few ms. Each loaded
# env holds ~8 MB, so the cache is bounded: at most MAX_IDLE_ENVS idle envs in all, the least
# recently released closed first (a pool of 1536 games once grew a run past 8 GB unbounded).
MAX_IDLE_ENVS = 256
_IDLE_ENVS: "OrderedDict[str, list]" = OrderedDict()
_LOCK = threading.Lock()


def acquire_env(game_path: str, start: Callable[[str], Any]):
    """A loaded env for game_path: an idle cached one if any, else `start(game_path)`."""
    with _LOCK:
        idle = _IDLE_ENVS.get(game_path)
        if idle:
            env = idle.pop()
            if not idle:
                del _IDLE_ENVS[game_path]
            return env
    return start(game_path)


def release_env(game_path: str, tw_env) -> None:
    """Give an env back to the cache; whoever plays game_path next reuses it. Beyond
    MAX_IDLE_ENVS idle envs, the least recently released game's envs are closed."""
    evicted = []
    with _LOCK:
        _IDLE_ENVS.setdefault(game_path, []).append(tw_env)
        _IDLE_ENVS.move_to_end(game_path)
        while sum(len(envs) for envs in _IDLE_ENVS.values()) > MAX_IDLE_ENVS:
            oldest = next(iter(_IDLE_ENVS))
            evicted.append(_IDLE_ENVS[oldest].pop(0))
            if not _IDLE_ENVS[oldest]:
                del _IDLE_ENVS[oldest]
    for env in evicted:  # outside the lock: closing stops an interpreter
        close = getattr(env, "close", None)
        if close is not None:
            close()


def idle_env_count() -> int:
    """Idle envs in the cache (all games)."""
    with _LOCK:
        return sum(len(envs) for envs in _IDLE_ENVS.values())


def normalize_command(text: str) -> str:
    """The form in which actions are compared: lowercased, surrounding whitespace stripped."""
    return text.strip().lower()


class TextWorldEpisode:
    """Plays one loaded textworld env (reused across resets; only `reset` rebuilds the game state)."""

    def __init__(self, tw_env, *, max_turns: int, win_reward: float = 10.0,
                 clean_feedback: Callable[[str], str] = str.strip,
                 plan_fn: Optional[Callable[[Any], list[str]]] = None):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.tw_env = tw_env
        self.max_turns = int(max_turns)
        self.win_reward = float(win_reward)
        self.clean_feedback = clean_feedback
        self.plan_fn = plan_fn
        self.state = None
        self.turn = 0
        self.done = True
        self.won = False
        self._plan: Optional[list[str]] = None
        self._by_normalized: dict[str, str] = {}

    # --- episode loop ---------------------------------------------------------------------
    def reset(self, walkthrough: Optional[list[str]] = None) -> tuple[str, dict[str, Any]]:
        self.state = reset_game(self.tw_env)  # the start state set back after the first reset (textworld_reset.py)
        self.turn, self.done, self.won = 0, False, False
        self._plan = list(walkthrough) if walkthrough is not None else None
        self._index_admissible()
        return self.clean_feedback(self.state.feedback), self.info()

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.done:
            raise RuntimeError("the episode is over; call reset() first")
        self.turn += 1
        command = self._by_normalized.get(normalize_command(action))
        if command is None:
            obs = NO_OP_FEEDBACK
        else:
            self._advance_plan(command)
            self.state, _, _ = self.tw_env.step(command)
            self._index_admissible()
            obs = self.clean_feedback(self.state.feedback)
        newly_won = bool(self.state["won"]) and not self.won
        self.won = bool(self.state["won"])
        # r_t = win_reward * 1[the game is won at turn t]  (non-zero at most once, at the end)
        reward = self.win_reward if newly_won else 0.0
        lost = bool(self.state.get("lost") or False)
        self.done = self.won or lost or self.turn >= self.max_turns
        info = self.info()
        info.update(lost=lost, truncated=self.done and not (self.won or lost), admissible=command is not None)
        return obs, reward, self.done, info

    def info(self) -> dict[str, Any]:
        return {"won": self.won, "admissible_actions": list(self.state["admissible_commands"]),
                "turn": self.turn}

    # --- admissibility and expert ---------------------------------------------------------
    def _index_admissible(self) -> None:
        self._by_normalized = {normalize_command(c): c for c in self.state["admissible_commands"]}

    def is_admissible(self, action: str) -> bool:
        return not self.done and normalize_command(action) in self._by_normalized

    def _advance_plan(self, command: str) -> None:
        """Pop the plan's head if the agent followed it; otherwise drop the plan (re-plan later)."""
        if self._plan and normalize_command(self._plan[0]) == normalize_command(command):
            self._plan.pop(0)
        else:
            self._plan = None

    def expert_action(self) -> Optional[str]:
        if self.done or self.state is None:
            return None
        if self._plan is None:
            if self.plan_fn is None:
                return None
            self._plan = list(self.plan_fn(self.state) or [])
        return self._plan[0] if self._plan else None


class PlaysTextWorld:
    """The turns of an env whose episode a TextWorldEpisode plays (household, alfworld): step,
    is_admissible and expert_action go to the episode of the last reset."""

    name: str
    _episode: Optional[TextWorldEpisode] = None

    def _require_episode(self) -> TextWorldEpisode:
        if self._episode is None:
            raise RuntimeError(f"call reset(seed) before stepping the {self.name} env")
        return self._episode

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        return self._require_episode().step(action)

    def is_admissible(self, action: str) -> bool:
        return self._require_episode().is_admissible(action)

    def expert_action(self) -> Optional[str]:
        return self._require_episode().expert_action()
