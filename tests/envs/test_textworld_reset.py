"""A reset by snapshot (arena/envs/textworld_reset.py) gives the game TextWorld's own reset gives.

Every committed household game (30) is played on one loaded env, three times over: a play of up
to MAX_TURNS commands after TextWorld's real reset, then the same commands after a snapshot reset;
the first play follows the walkthrough (a win), the others pick admissible commands at random.
Every turn's whole state is compared (feedback, admissible and policy commands, facts, won, lost,
score, moves, ...), so a snapshot that missed a piece of the interpreter's or a wrapper's state
shows up as a different turn.
"""
from __future__ import annotations

import random

import pytest

from arena.envs import textworld_reset
from arena.envs.household import HouseholdEnv, _start_env
from arena.envs.textworld_reset import full_resets, reset_game, restorable, wrapper_layers

MAX_TURNS = 8


@pytest.fixture(scope="module")
def game_paths(tmp_path_factory):
    env = HouseholdEnv(cache_dir=str(tmp_path_factory.mktemp("household-cache")), pool="committed")
    return [(g, str(env.games_dir / (g["name"] + ".z8"))) for g in env.manifest["games"]]


def comparable(state) -> dict:
    """The state's items as text; sets of facts and actions sorted (their order is a set's);
    the Game object and the live GameProgression are compared through what they put in the state."""
    out = {}
    for key, value in state.items():
        if key in ("game", "_game_progression"):
            continue
        if key in ("_facts", "_valid_actions", "facts"):
            out[key] = sorted(map(str, value))
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def play(tw_env, state, commands: list[str]) -> list[dict]:
    """Every turn's comparable state, from `state` (the reset's), playing `commands`."""
    trace = [comparable(state)]
    for command in commands:
        state, _, done = tw_env.step(command)
        trace.append(comparable(state))
        if done:
            break
    return trace


def random_commands(tw_env, state, rng: random.Random) -> list[str]:
    """Up to MAX_TURNS admissible commands picked at random, played on tw_env as they are picked."""
    commands = []
    for _ in range(MAX_TURNS):
        command = rng.choice(sorted(state["admissible_commands"]))
        commands.append(command)
        state, _, done = tw_env.step(command)
        if done:
            break
    return commands


def test_a_snapshot_reset_replays_every_committed_game_like_textworlds_reset(game_paths):
    rng = random.Random(68)
    for game, path in game_paths:
        tw_env = _start_env(path)
        assert restorable(wrapper_layers(tw_env)), game["name"]
        first = reset_game(tw_env)  # the real reset; the snapshot is taken after it
        assert textworld_reset._SNAPSHOTS.get(tw_env) is not None
        plays = [list(game["walkthrough"])]
        with full_resets():
            plays += [random_commands(tw_env, reset_game(tw_env), rng) for _ in range(2)]
        traces = []
        for commands in plays:
            with full_resets():
                real = play(tw_env, reset_game(tw_env), commands)
            restored = play(tw_env, reset_game(tw_env), commands)
            assert restored == real, (game["name"], commands)
            traces.append(real)
        assert traces[0][0] == comparable(first)
        assert traces[0][-1]["won"] == "True", game["name"]  # the walkthrough's play was won
        assert {len(trace) for trace in traces[1:]} != {1}  # the random plays took turns
        tw_env.close()


def test_a_restored_game_does_not_share_what_a_step_changes(game_paths):
    # two plays from snapshot resets: the second must not see the first's moves, e.g. the
    # GameProgression the first play advanced or the start state's lists
    _, path = game_paths[0]
    tw_env = _start_env(path)
    start = comparable(reset_game(tw_env))
    state = reset_game(tw_env)
    tw_env.step(sorted(state["admissible_commands"])[0])
    state["admissible_commands"].append("a command no game has")  # a caller changing its state
    again = reset_game(tw_env)
    assert comparable(again) == start
    assert again["_game_progression"] is vars(wrapper_layers(tw_env)[1])["_game_progression"]  # one live copy
    tw_env.close()


def test_other_wrapper_chains_take_the_real_reset():
    class Plain:  # an env that wraps nothing (e.g. a fake ALFWorld game)
        resets = 0

        def reset(self):
            Plain.resets += 1
            return {"feedback": "start"}

    env = Plain()
    assert not restorable(wrapper_layers(env))
    assert reset_game(env) == {"feedback": "start"} and reset_game(env) == {"feedback": "start"}
    assert Plain.resets == 2 and env not in textworld_reset._SNAPSHOTS
