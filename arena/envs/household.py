"""The household text task: ALFWorld-like pick-and-place games made with TextWorld.

Games come from a fixed pool (`household_games`): the committed pool has 30 games (20 train,
10 eval); `pool="large"` makes `n_large` games (default 1536) once in the cache folder: 256
eval, 256 validation and n_large - 512 training games (1024 by default), every split made of
whole 16-game size grids (`household_games.large_pool_specs`; docs/testbed.md, "The large
pool"); `n_eval` (default 256, up to 2048) adds n_eval - 256 eval games made from seeds no
training game uses (`household_games.extra_eval_specs`), for a tighter held-out estimate. Seeds
pick games:

    eval_seed(i)                        -> eval game i mod n_eval
    VAL_SEED_OFFSET + i, i < n_val      -> validation game i        (BC's band: bc_stop.val_seeds)
    any other training seed s           -> train game s mod n_train

so BC's validation games are neither its demonstration games nor the eval games. A pool without
a validation split (the committed one) maps every training seed to its training games. An RL
run draws its seeds uniformly from [0, EVAL_SEED_OFFSET), so one group in ~4000 plays a
validation game: validation is only measured by BC, before RL, so nothing measured sees it.

The first observation is the room's description followed by "Your task is to: <objective>", the
way ALFWorld states its task. Rewards, admissibility and the expert follow `TextWorldEpisode`
(10 * won on the winning turn; non-admissible actions are no-ops answered "Nothing happens.").
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .base import EVAL_SEED_OFFSET, VAL_SEED_OFFSET, EnvUnavailableError
from .household_games import (COMMITTED_POOL_DIR, EVAL_SIZES, LARGE_EVAL_GAMES, LARGE_FIRST_EXTRA_TRAIN,
                              LARGE_FIRST_VAL, LARGE_SIZES, MANIFEST_NAME, SPLITS, default_cache_dir,
                              ensure_large_pool, games_folder, large_pool_layout, read_manifest, verified_game)
from .spec import AT_LEAST_ONE, EnvSpec
from .textworld_episode import PlaysTextWorld, TextWorldEpisode, acquire_env, release_env

POOLS = ("committed", "large")
DEFAULT_LARGE_GAMES = 1536  # 1024 train + 256 validation + 256 eval
DEFAULT_LARGE_EVAL = LARGE_EVAL_GAMES  # eval games of the large pool; more are extra games (EVAL_SIZES)
# The longest committed walkthrough has 4 commands; 15 turns leave room for ~3x that plus a few
# look/examine turns (ALFWorld's 50 is for walkthroughs of 10-30 steps).
DEFAULT_MAX_TURNS = 15
TASK_PREFIX = "Your task is to: "

INSTRUCTION = (
    "You are an expert agent operating in a text-based household. Each turn you read what you "
    "observe and choose exactly one of the admissible actions (for example 'go north', 'open "
    "chest', 'take apple from table', 'put apple on shelf') to complete the task stated after "
    "'Your task is to:'. Actions that are not admissible do nothing."
)

_STATUS_LINE = re.compile(r"\n?>[ \t]*-=[^\n]*=-[ \t]*-?\d+/\d+[ \t]*$")
_END_OF_GAME = re.compile(r"\*\*\* The End \*\*\*.*|\*\*\* You lost! \*\*\*.*", re.DOTALL)
_SCORE_NOTE = re.compile(r"Your score has just gone up by \w+ points?\.")


def clean_household_text(text: str) -> str:
    """Compact a textworld z-machine output: no banner, no status line, no end-of-game chatter.

    The ASCII-art banner is the block of leading lines without a letter; the status line is
    the trailing `>   -= Room =-score/moves`.
    """
    text = _STATUS_LINE.sub("", text.rstrip())
    text = _SCORE_NOTE.sub("", _END_OF_GAME.sub("", text))
    lines = text.split("\n")
    while lines and not re.search(r"[A-Za-z]", lines[0]):
        lines.pop(0)
    text = "\n".join(line.rstrip() for line in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def first_observation(feedback: str, objective: str) -> str:
    """The intro minus the objective paragraph, then the objective in ALFWorld's wording."""
    description = clean_household_text(feedback).replace(objective.strip(), "").strip()
    return f"{description}\n\n{TASK_PREFIX}{objective.strip()}"


def _start_env(game_path: str):
    import textworld

    infos = textworld.EnvInfos(admissible_commands=True, policy_commands=True, won=True, lost=True,
                               objective=True, feedback=True)
    with warnings.catch_warnings():
        # jericho does not know textworld's games ("score, move, change detection disabled");
        # textworld tracks score and state itself, so the warning says nothing useful here.
        warnings.filterwarnings("ignore", message=".*is not fully supported.*")
        return textworld.start(game_path, request_infos=infos)


class BadHouseholdPool(EnvUnavailableError, ValueError):
    """An unknown pool name or large-pool size (the CLI exits 2 and lists the valid values)."""


@dataclass(frozen=True)
class HouseholdKwargs:
    """env.kwargs of household (arena.envs.spec): the one place for their defaults."""
    max_turns: int = field(default=DEFAULT_MAX_TURNS, metadata=AT_LEAST_ONE)
    pool: str = "committed"  # POOLS
    cache_dir: Optional[str] = None  # the large pool's cache; None: household_games.default_cache_dir()
    n_large: int = DEFAULT_LARGE_GAMES  # games of the large pool (LARGE_SIZES)
    n_eval: int = DEFAULT_LARGE_EVAL  # eval games of the large pool (EVAL_SIZES)
    large_first_seed: int = 1001  # generator seed of the large pool's first game
    win_reward: float = 10.0


def check_available(kw: HouseholdKwargs) -> None:
    """BadHouseholdPool unless `pool`, `n_large` and `n_eval` are valid (cheap: run by `arena
    train|bc|sweep` before anything starts; generating the large pool is left to the first env)."""
    if kw.pool not in POOLS:
        raise BadHouseholdPool(f"unknown household pool {kw.pool!r}; valid: {', '.join(POOLS)}")
    if kw.pool == "large" and kw.n_large not in LARGE_SIZES:
        raise BadHouseholdPool(f"env.kwargs.n_large={kw.n_large!r} is not a large household pool size; valid: "
                               f"{', '.join(map(str, LARGE_SIZES))} (multiples of 256 from 768)")
    if kw.pool == "large" and kw.n_eval not in EVAL_SIZES:
        raise BadHouseholdPool(f"env.kwargs.n_eval={kw.n_eval!r} is not a large household pool's eval size; valid: "
                               f"{', '.join(map(str, EVAL_SIZES))} (multiples of 256 up to 2048)")
    if kw.pool == "committed" and kw.n_eval != DEFAULT_LARGE_EVAL:
        raise BadHouseholdPool(f"env.kwargs.n_eval={kw.n_eval!r} needs env.kwargs.pool=large; the committed pool "
                               f"has {eval_size(kw)} eval games")


# CPU seconds per generated game, one core (docs/testbed.md, "The large pool"): 0.6-1.7 s measured
GENERATE_SECONDS_PER_GAME = (0.6, 1.7)


def _cache(kw: HouseholdKwargs) -> Path:
    return Path(kw.cache_dir) if kw.cache_dir is not None else default_cache_dir()


def first_use_notice(kw: HouseholdKwargs) -> Optional[str]:
    """None unless `pool="large"` is not in the cache yet; then what its first use will generate."""
    if kw.pool != "large":
        return None
    pool_dir, specs = large_pool_layout(_cache(kw), n_games=kw.n_large, first_seed=kw.large_first_seed,
                                        n_eval=kw.n_eval)
    if (pool_dir / MANIFEST_NAME).is_file():
        return None
    low, high = (round(len(specs) * s / 60) for s in GENERATE_SECONDS_PER_GAME)
    return (f"household: the large pool {pool_dir} is not in the cache; its first use generates up to {len(specs)} "
            f"games (~{low}-{high} min of one core, less where another pool's games can be copied), once")


def eval_size(kw: HouseholdKwargs) -> int:
    """Distinct eval games (arena.envs.eval_size): eval_seed(i) plays eval game i mod this. The
    committed pool's count is read from its manifest (a small JSON file; nothing is extracted)."""
    if kw.pool == "committed":
        return sum(game["split"] == "eval" for game in read_manifest(COMMITTED_POOL_DIR)["games"])
    return int(kw.n_eval)


def validation_size(kw: HouseholdKwargs) -> int:
    """Validation games of the pool (arena.envs.validation_size): the large pool's split
    [LARGE_FIRST_VAL, LARGE_FIRST_EXTRA_TRAIN), 256 games; the committed pool has none (its
    validation seeds play training games, see the module docstring)."""
    return 0 if kw.pool == "committed" else LARGE_FIRST_EXTRA_TRAIN - LARGE_FIRST_VAL


class HouseholdEnv(PlaysTextWorld):
    name = "household"
    instruction = INSTRUCTION

    def __init__(self, **kwargs: Any):
        kw = HouseholdKwargs(**kwargs)  # the defaults: HouseholdKwargs
        check_available(kw)
        if kw.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {kw.max_turns}")
        self.max_turns = int(kw.max_turns)
        self.win_reward = float(kw.win_reward)
        cache = _cache(kw)
        if kw.pool == "committed":
            pool_dir = COMMITTED_POOL_DIR
        else:
            pool_dir = ensure_large_pool(cache, n_games=kw.n_large, first_seed=kw.large_first_seed, n_eval=kw.n_eval)
        manifest = read_manifest(pool_dir)
        self.pool_dir, self.manifest = pool_dir, manifest
        self.games_dir = games_folder(pool_dir, manifest, cache)
        self.games = {split: [g for g in manifest["games"] if g["split"] == split] for split in SPLITS}
        if not self.games["train"] or not self.games["eval"]:
            raise ValueError(f"pool {pool_dir} needs train and eval games")
        self.game: Optional[dict] = None
        self._episode: Optional[TextWorldEpisode] = None
        self._game_path: Optional[str] = None

    def game_for_seed(self, seed: int) -> dict:
        """eval_seed(i) -> eval game i mod n_eval; VAL_SEED_OFFSET + i (i < n_val) -> validation
        game i; other training seeds s -> train game s mod n_train (module docstring)."""
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"seeds are >= 0, got {seed}")
        if seed >= EVAL_SEED_OFFSET:
            games = self.games["eval"]
            return games[(seed - EVAL_SEED_OFFSET) % len(games)]
        if 0 <= seed - VAL_SEED_OFFSET < len(self.games["val"]):
            return self.games["val"][seed - VAL_SEED_OFFSET]
        games = self.games["train"]
        return games[seed % len(games)]

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        game = self.game_for_seed(seed)
        path = str(self.games_dir / (game["name"] + ".z8"))
        if path != self._game_path:  # its files are checked the first time this process plays it
            verified_game(self.pool_dir, self.games_dir, self.manifest, game)
            if self._episode is not None:
                release_env(self._game_path, self._episode.tw_env)
            self._episode = TextWorldEpisode(
                acquire_env(path, _start_env), max_turns=self.max_turns, win_reward=self.win_reward,
                clean_feedback=clean_household_text, plan_fn=lambda state: state["policy_commands"])
            self._game_path = path
        self.game = game
        feedback, info = self._episode.reset(walkthrough=game["walkthrough"])
        obs = first_observation(self._episode.state.feedback, self._episode.state["objective"])
        info.update(game=game["name"], split=game["split"], task_type="pick_and_place")
        return obs, info

    def close(self) -> None:
        """Give the textworld env back to the per-process cache."""
        if self._episode is not None:
            release_env(self._game_path, self._episode.tw_env)
        self._episode, self._game_path = None, None


SPEC = EnvSpec(name="household", kwargs=HouseholdKwargs, factory=HouseholdEnv, check_available=check_available,
               validation_size=validation_size, eval_size=eval_size, first_use_notice=first_use_notice)
