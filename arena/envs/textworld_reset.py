"""Reset a loaded TextWorld game by setting back its start state instead of restarting it.

TextWorld's own reset restarts the z-machine (jericho's frotz setup), sends its tracking
commands to the game, and rebuilds the game's progression (every applicable action of the start
state): ~3 ms a game, two thirds of a household eval's time as measured (docs/testbed.md, "TextWorld
resets by snapshot, norm weights inside the products"). All of it
is a function of the game file, so after a loaded env's first real reset `reset_game` keeps

    the interpreter's state   jericho's get_state(): memory, stack, program counter, RNG, ...
    each wrapper's attributes the start GameState, tracked infos, GameProgression, move count, ...

and every later reset of that env sets them back: jericho's set_state, then each wrapper's
attributes, where a GameState, a list, dict or set, or a GameProgression (what a step may
change or replace) is a fresh copy, and objects that two attributes shared before share one copy after.

Only the wrapper chain that `textworld.start` builds for TextWorld's own games is restored
(`RESTORABLE_CHAIN`); any other env (ALFWorld's wrappers) takes its real reset. Inside
`full_resets()` every reset is the real one: the benchmarks' reference path, so that a ratio to
"today's" eval keeps TextWorld's full reset cost. Tests: tests/envs/test_textworld_reset.py plays
every committed household game from both kinds of reset and compares every turn's state.
"""
from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from typing import Any, Iterator

# The layers of textworld.start(path) for a TextWorld-made .z8 game, outermost first.
RESTORABLE_CHAIN = ("TWInform7", "StateTracking", "Inform7Data", "GameData", "JerichoEnv")

# one snapshot per loaded env; `arena eval --concurrency N` resets N envs from N threads at once
_SNAPSHOTS: "weakref.WeakKeyDictionary[Any, ResetSnapshot]" = weakref.WeakKeyDictionary()
_SNAPSHOTS_LOCK = threading.Lock()
_full_resets = False


def wrapper_layers(tw_env) -> list:
    """tw_env and every env it wraps, outermost first."""
    layers = [tw_env]
    while "_wrapped_env" in vars(layers[-1]):
        layers.append(vars(layers[-1])["_wrapped_env"])
    return layers


def restorable(layers: list) -> bool:
    return tuple(type(layer).__name__ for layer in layers) == RESTORABLE_CHAIN


def _fresh(value: Any, copies: dict[int, Any]) -> Any:
    """A copy of value that a game step may change without touching the snapshot: GameState
    (a dict) item by item, other lists, dicts and sets shallowly, GameProgression by its own copy();
    anything else (the Game, the interpreter, numbers, strings) is shared. `copies` maps
    id(original) -> its copy."""
    from textworld.core import GameState
    from textworld.generator.game import GameProgression

    if id(value) in copies:
        return copies[id(value)]
    if isinstance(value, GameState):
        out = GameState()
        copies[id(value)] = out
        for key, item in value.items():
            dict.__setitem__(out, key, _fresh(item, copies))
    elif isinstance(value, GameProgression):
        out = value.copy()
    elif isinstance(value, (list, dict, set)):
        out = copy.copy(value)
    else:
        return value
    copies[id(value)] = out
    return out


class ResetSnapshot:
    """A loaded env's state right after a real reset (module docstring)."""

    def __init__(self, layers: list):
        self.interpreter = layers[-1]._jericho.get_state()  # (ram, stack, pc, sp, fp, frames, opcode, rng, text)
        copies: dict[int, Any] = {}
        self.attributes = [{key: _fresh(value, copies) for key, value in vars(layer).items() if key != "_wrapped_env"}
                           for layer in layers]

    def restore(self, layers: list):
        """Set layers back to the snapshot; the outermost state (what tw_env.reset() returns)."""
        layers[-1]._jericho.set_state(self.interpreter)
        copies: dict[int, Any] = {}
        for layer, attributes in zip(layers, self.attributes):
            for key, value in attributes.items():
                vars(layer)[key] = _fresh(value, copies)
        return next(vars(layer)["state"] for layer in layers if "state" in vars(layer))


def reset_game(tw_env):
    """tw_env.reset()'s state: by TextWorld's reset the first time this env is reset (and inside
    `full_resets()`, or for a chain other than RESTORABLE_CHAIN), by its snapshot after that."""
    layers = wrapper_layers(tw_env)
    if _full_resets or not restorable(layers):
        return tw_env.reset()
    with _SNAPSHOTS_LOCK:
        snapshot = _SNAPSHOTS.get(tw_env)
    if snapshot is None:
        state = tw_env.reset()
        taken = ResetSnapshot(layers)
        with _SNAPSHOTS_LOCK:
            _SNAPSHOTS[tw_env] = taken
        return state
    return snapshot.restore(layers)


@contextlib.contextmanager
def full_resets() -> Iterator[None]:
    """Inside: every `reset_game` is TextWorld's real reset (the benchmarks' reference path)."""
    global _full_resets
    saved, _full_resets = _full_resets, True
    try:
        yield
    finally:
        _full_resets = saved
