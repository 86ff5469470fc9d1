"""ALFWorld (text) adapter over the real `alfworld` package and data.

Optional: needs `pip install 'arena[alfworld]'`, then `alfworld-download`, with ALFWORLD_DATA
pointing at the data. The episode loop is the shared `TextWorldEpisode` (the household tests
exercise it): reward 10 * won (docs/methods.md §3), admissible commands from textworld, the
observation text exactly as ALFWorld's textworld env returns it.

Games: the `game.tw-pddl` files of a split, sorted by path (skipping the games ALFWorld itself
skips: no initial_state.pddl, 'movable'/'Sliced' trajectories, games marked unsolvable).
Training seed s plays train game s mod n; eval_seed(i) plays game i mod n of the eval split.
DEV: ALFWorld's own env draws games at random from its seed; arena maps seeds to games so that
the n members of a group and every eval seed are reproducible.
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .base import EVAL_SEED_OFFSET, EnvUnavailableError
from .spec import AT_LEAST_ONE, EnvSpec
from .textworld_episode import PlaysTextWorld, TextWorldEpisode, acquire_env, release_env

# ALFWorld's split folders under $ALFWORLD_DATA (alfworld base_config.yaml).
SPLIT_DIRS = {
    "train": "json_2.1.1/train",
    "eval_in_distribution": "json_2.1.1/valid_seen",
    "eval_out_of_distribution": "json_2.1.1/valid_unseen",
}
# Per-type success keys, in verl-agent's matching order (env_manager._process_gamefile):
# the first name that is a substring of the game file's path wins.
TASK_TYPES = (
    "pick_and_place",
    "pick_two_obj_and_place",
    "look_at_obj_in_light",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_clean_then_place_in_recep",
)
TASK_PREFIX = "Your task is to: "
DEFAULT_MAX_TURNS = 50  # env.max_steps of the ALFWorld scripts (docs/methods.md §10)

INSTRUCTION = (
    "You are an expert agent operating in the ALFRED embodied household environment. Each turn "
    "you read what you observe and choose exactly one of the admissible actions to complete "
    "the task stated after 'Your task is to:'. Actions that are not admissible do nothing."
)

HOW_TO_GET_ALFWORLD = (
    "ALFWorld is an optional extra. Install it with  pip install 'arena[alfworld]' , download "
    "its data with  alfworld-download  (or  alfworld-download --data-dir DIR ), and set "
    "ALFWORLD_DATA to that folder (default ~/.cache/alfworld). Without a network, use the "
    "offline 'household' environment instead."
)


class AlfworldUnavailableError(EnvUnavailableError):
    """The alfworld package or its data is missing (the CLI exits 2 with this message)."""


def task_type(gamefile: str) -> Optional[str]:
    """The ALFWorld task type named in a game file's path, or None."""
    for name in TASK_TYPES:
        if name in str(gamefile):
            return name
    return None


def extract_task(observation: str) -> str:
    """The task description: the text after 'Your task is to: ' in the first observation."""
    start = observation.find(TASK_PREFIX)
    if start == -1:
        raise ValueError(f"no {TASK_PREFIX!r} in the observation: {observation[:200]!r}")
    return observation[start + len(TASK_PREFIX):].strip()


def format_admissible_actions(actions: list[str]) -> str:
    """verl-agent's prompt rendering: each action quoted, joined by newline+space, 'help' dropped."""
    return "\n ".join(f"'{a}'" for a in actions if a != "help")


def _is_playable(game_dir: Path) -> bool:
    if "movable" in str(game_dir) or "Sliced" in str(game_dir):
        return False
    if not (game_dir / "initial_state.pddl").is_file():
        return False
    try:
        return json.loads((game_dir / "game.tw-pddl").read_text()).get("solvable", True) is not False
    except (OSError, ValueError):
        return False


def find_game_files(data_dir: Path, split: str) -> list[Path]:
    """The playable `game.tw-pddl` files of a split, sorted by path."""
    if split not in SPLIT_DIRS:
        raise ValueError(f"unknown ALFWorld split {split!r}; valid: {', '.join(SPLIT_DIRS)}")
    root = Path(data_dir) / SPLIT_DIRS[split]
    return sorted(p for p in root.rglob("game.tw-pddl") if _is_playable(p.parent))


def resolve_data_dir(data_dir: Optional[str]) -> Path:
    """Check the package imports and the data is there; raise AlfworldUnavailableError if not."""
    try:
        importlib.import_module("alfworld")
    except ImportError as err:
        raise AlfworldUnavailableError(f"the alfworld package is not installed ({err}). "
                                       + HOW_TO_GET_ALFWORLD) from err
    chosen = data_dir or os.environ.get("ALFWORLD_DATA")
    if not chosen:
        raise AlfworldUnavailableError("ALFWORLD_DATA is not set. " + HOW_TO_GET_ALFWORLD)
    if not (Path(chosen).expanduser() / "json_2.1.1").is_dir():
        raise AlfworldUnavailableError(
            f"no ALFWorld data at {chosen} (json_2.1.1/ is missing). " + HOW_TO_GET_ALFWORLD)
    return Path(chosen).expanduser()


@dataclass(frozen=True)
class AlfworldKwargs:
    """env.kwargs of alfworld (arena.envs.spec): the one place for their defaults."""
    max_turns: int = field(default=DEFAULT_MAX_TURNS, metadata=AT_LEAST_ONE)
    data_dir: Optional[str] = None  # None: $ALFWORLD_DATA
    train_split: str = "train"
    eval_split: str = "eval_in_distribution"
    win_reward: float = 10.0


def check_available(kw: AlfworldKwargs) -> None:
    """AlfworldUnavailableError unless the package imports and the data holds playable training
    games (what `arena train|sweep|envs` check before anything runs)."""
    root = resolve_data_dir(kw.data_dir)
    if not find_game_files(root, kw.train_split):
        raise AlfworldUnavailableError(f"no playable {kw.train_split} games under {root}. " + HOW_TO_GET_ALFWORLD)


def validation_size(kw: AlfworldKwargs) -> int:
    """No validation split (arena.envs.validation_size): every training seed, BC's validation
    seeds included, plays a training game (module docstring), which BC then says in its log."""
    return 0


def eval_size(kw: AlfworldKwargs) -> int:
    """Distinct eval games (arena.envs.eval_size): the playable games of the eval split
    (valid_seen has 140 in ALFWorld 2.1.1); eval_seed(i) plays game i mod this."""
    return len(find_game_files(resolve_data_dir(kw.data_dir), kw.eval_split))


def _start_env(game_path: str):
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    infos = textworld.EnvInfos(won=True, admissible_commands=True, feedback=True, extras=["gamefile"])
    return textworld.start(game_path, request_infos=infos, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])


def _replan(tw_env) -> list[str]:
    """textworld's PDDL planner from the current state (run only when the expert is asked)."""
    base = tw_env.unwrapped
    return base._pddl_state.replan(base._entity_infos)


class AlfworldEnv(PlaysTextWorld):
    name = "alfworld"
    instruction = INSTRUCTION

    def __init__(self, **kwargs: Any):
        kw = AlfworldKwargs(**kwargs)  # the defaults: AlfworldKwargs
        if kw.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {kw.max_turns}")
        self.max_turns = int(kw.max_turns)
        self.win_reward = float(kw.win_reward)
        self.data_dir = resolve_data_dir(kw.data_dir)
        self.games = {"train": find_game_files(self.data_dir, kw.train_split),
                      "eval": find_game_files(self.data_dir, kw.eval_split)}
        for role, files in self.games.items():
            if not files:
                raise AlfworldUnavailableError(f"no playable {role} games under {self.data_dir}. "
                                               + HOW_TO_GET_ALFWORLD)
        self.gamefile: Optional[str] = None
        self.task: Optional[str] = None
        self._episode: Optional[TextWorldEpisode] = None

    def game_for_seed(self, seed: int) -> str:
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"seeds are >= 0, got {seed}")
        role, index = ("eval", seed - EVAL_SEED_OFFSET) if seed >= EVAL_SEED_OFFSET else ("train", seed)
        return str(self.games[role][index % len(self.games[role])])

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        path = self.game_for_seed(seed)
        if path != self.gamefile:
            if self._episode is not None:
                release_env(self.gamefile, self._episode.tw_env)
            tw_env = acquire_env(path, _start_env)
            self._episode = TextWorldEpisode(tw_env, max_turns=self.max_turns, win_reward=self.win_reward,
                                             clean_feedback=lambda text: text,
                                             plan_fn=lambda state: _replan(tw_env))
            self.gamefile = path
        obs, info = self._episode.reset()
        self.task = extract_task(obs)
        info.update(gamefile=path, task_type=task_type(path), task=self.task)
        return obs, info


SPEC = EnvSpec(name="alfworld", kwargs=AlfworldKwargs, factory=AlfworldEnv, check_available=check_available,
               validation_size=validation_size, eval_size=eval_size)
