"""ALFWorld adapter: the missing-package/data errors (exit 2), and the adapter run end to end
on a tiny hand-made data folder in ALFWorld's layout (tests/envs/data/alfworld)."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from arena.cli import main
from arena.envs import EnvUnavailableError, check_available, eval_seed, make
from arena.envs import alfworld as alfworld_module
from arena.envs.alfworld import (AlfworldEnv, AlfworldUnavailableError, extract_task,
                                 find_game_files, format_admissible_actions, task_type)
from arena.envs.textworld_episode import NO_OP_FEEDBACK, TextWorldEpisode

ALFWORLD_INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
    "around you, you see a cabinet 1, a countertop 1, and a sinkbasin 1.\n\n"
    "Your task is to: put a clean cloth in countertop.")


def test_missing_package_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "alfworld", None)  # makes `import alfworld` fail
    for build in (AlfworldEnv, lambda: make("alfworld")):
        with pytest.raises(AlfworldUnavailableError) as err:
            build()
        message = str(err.value)
        assert "not installed" in message
        assert "pip install 'arena[alfworld]'" in message
        assert "alfworld-download" in message and "ALFWORLD_DATA" in message


def test_missing_data_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "alfworld", types.ModuleType("alfworld"))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(AlfworldUnavailableError, match="ALFWORLD_DATA is not set.*alfworld-download"):
        AlfworldEnv()
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(AlfworldUnavailableError, match=r"no ALFWorld data at .*json_2\.1\.1/ is missing"):
        AlfworldEnv()
    (tmp_path / "json_2.1.1" / "train").mkdir(parents=True)
    with pytest.raises(AlfworldUnavailableError, match="no playable train games"):
        AlfworldEnv()


def test_task_type_from_game_path():
    root = "/data/json_2.1.1/train"
    assert task_type(f"{root}/pick_and_place_simple-Book-None-SideTable-329/trial_T1/game.tw-pddl") == "pick_and_place"
    # 'pick_two_obj_and_place' does not contain 'pick_and_place', so it keeps its own type.
    assert task_type(f"{root}/pick_two_obj_and_place-Pen-None-Desk-1/trial_T2/game.tw-pddl") == "pick_two_obj_and_place"
    assert task_type(f"{root}/look_at_obj_in_light-Bowl-None-DeskLamp-2/t/game.tw-pddl") == "look_at_obj_in_light"
    assert task_type(f"{root}/pick_heat_then_place_in_recep-Egg-None-Fridge-5/t/game.tw-pddl") == "pick_heat_then_place_in_recep"
    assert task_type(f"{root}/pick_cool_then_place_in_recep-Apple-None-Microwave-7/t/game.tw-pddl") == "pick_cool_then_place_in_recep"
    assert task_type(f"{root}/pick_clean_then_place_in_recep-Cloth-None-Cabinet-4/t/game.tw-pddl") == "pick_clean_then_place_in_recep"
    assert task_type("/somewhere/else/game.tw-pddl") is None


def test_extract_task_and_admissible_rendering():
    assert extract_task(ALFWORLD_INTRO) == "put a clean cloth in countertop."
    with pytest.raises(ValueError, match="Your task is to"):
        extract_task("You arrive at cabinet 1.")
    # verl-agent: quoted, joined by "\n ", 'help' removed.
    assert format_admissible_actions(["go to cabinet 1", "help", "look"]) == "'go to cabinet 1'\n 'look'"


def _make_game(root, name, *, solvable=True, with_pddl=True):
    game_dir = root / name / "trial_T1"
    game_dir.mkdir(parents=True)
    (game_dir / "game.tw-pddl").write_text(json.dumps({"solvable": solvable}))
    if with_pddl:
        (game_dir / "initial_state.pddl").write_text("(define)")
    return game_dir / "game.tw-pddl"


def test_find_game_files_skips_what_alfworld_skips(tmp_path):
    train = tmp_path / "json_2.1.1" / "train"
    good_b = _make_game(train, "pick_two_obj_and_place-Pen-None-Desk-1")
    good_a = _make_game(train, "pick_and_place_simple-Book-None-SideTable-329")
    _make_game(train, "pick_and_place_simple-Book-None-Shelf-1", solvable=False)
    _make_game(train, "pick_and_place_simple-Knife-None-Table-2", with_pddl=False)
    _make_game(train, "pick_and_place_simple-Pan-movable-Table-3")
    _make_game(train, "pick_and_place_simple-AppleSliced-None-Table-4")
    assert find_game_files(tmp_path, "train") == [good_a, good_b]
    with pytest.raises(ValueError, match="train, eval_in_distribution, eval_out_of_distribution"):
        find_game_files(tmp_path, "test")


def test_seed_to_game_mapping_without_data():
    env = object.__new__(AlfworldEnv)  # skip the data check: only the mapping is exercised
    env.games = {"train": ["t0", "t1", "t2"], "eval": ["e0", "e1"]}
    assert [env.game_for_seed(s) for s in (0, 1, 2, 3, 7)] == ["t0", "t1", "t2", "t0", "t1"]
    assert [env.game_for_seed(eval_seed(i)) for i in (0, 1, 2)] == ["e0", "e1", "e0"]
    # BC's validation seeds (500_000 + i) are training seeds too: 500_000 mod 3 = 2 -> "t2", so
    # the env reports a validation split of 0 games (arena.envs.validation_size) and BC says so
    from arena.bc.stop import val_seeds
    from arena.envs import validation_size
    assert env.game_for_seed(val_seeds(1)[0]) == "t2" and validation_size("alfworld") == 0


class FakeState(dict):
    """The two parts of a textworld GameState the episode reads: item access and `.feedback`."""

    def __init__(self, feedback, **items):
        super().__init__(**items)
        self.feedback = feedback


class FakeAlfworldGame:
    """ALFWorld-style game: go to the countertop, then put the cloth there to win."""

    def reset(self):
        self.at_counter = False
        return FakeState(ALFWORLD_INTRO, won=False, lost=False,
                         admissible_commands=["go to countertop 1", "help", "look"])

    def step(self, command):
        if command == "go to countertop 1":
            self.at_counter = True
            state = FakeState("You arrive at countertop 1. On the countertop 1, you see nothing.",
                              won=False, lost=False,
                              admissible_commands=["help", "look", "put cloth 1 in/on countertop 1"])
        else:
            assert command == "put cloth 1 in/on countertop 1" and self.at_counter
            state = FakeState("You put the cloth 1 in/on the countertop 1.", won=True, lost=False,
                              admissible_commands=["help", "look"])
        return state, float(state["won"]), state["won"]


def test_shared_episode_on_alfworld_style_game():
    """Reward 10 * won on the winning turn only; non-admissible text is a no-op ('Nothing happens.').

    Turns: 'Go To Countertop 1' (admissible after lowercasing) r=0; 'take cloth' (not admissible)
    r=0 and the game is not stepped; 'put cloth 1 in/on countertop 1' wins: r=10. Return 10.
    """
    plans = []
    episode = TextWorldEpisode(FakeAlfworldGame(), max_turns=50, clean_feedback=lambda text: text,
                               plan_fn=lambda state: plans.append(1) or ["go to countertop 1"])
    obs, info = episode.reset()
    assert obs == ALFWORLD_INTRO and extract_task(obs) == "put a clean cloth in countertop."
    assert episode.expert_action() == "go to countertop 1" and len(plans) == 1  # planned lazily
    steps = [episode.step(a) for a in ("Go To Countertop 1", "take cloth", "put cloth 1 in/on countertop 1")]
    assert [s[1] for s in steps] == [0.0, 0.0, 10.0] and [s[2] for s in steps] == [False, False, True]
    assert steps[1][0] == NO_OP_FEEDBACK and steps[1][3]["admissible"] is False
    assert steps[2][0] == "You put the cloth 1 in/on the countertop 1." and steps[2][3]["won"] is True


TINY_DATA = Path(__file__).parent / "data" / "alfworld"
TRAIN_GAMES = ["look_at_obj_in_light-Book-None-DeskLamp-2", "pick_and_place_simple-Cloth-None-CounterTop-1"]


class ScriptedAlfredGame:
    """Test double of ALFWorld's textworld env for a hand-made game (its scripted_game.json):
    the intro, then the walkthrough's commands in order; admissible = help, look, inventory and
    the next walkthrough command; the last command wins."""

    def __init__(self, game_path: str):
        self.script = json.loads((Path(game_path).parent / "scripted_game.json").read_text())
        self.done_steps = 0

    def remaining(self) -> list[str]:
        return [s["command"] for s in self.script["walkthrough"][self.done_steps:]]

    def _state(self, feedback: str) -> FakeState:
        won = not self.remaining()
        return FakeState(feedback, won=won, lost=False,
                         admissible_commands=["help", "inventory", "look", *self.remaining()[:1]])

    def reset(self):
        self.done_steps = 0
        return self._state(self.script["intro"])

    def step(self, command):
        if command in self.remaining()[:1]:
            feedback = self.script["walkthrough"][self.done_steps]["feedback"]
            self.done_steps += 1
        else:
            feedback = "Nothing happens."
        state = self._state(feedback)
        return state, float(state["won"]), state["won"]


@pytest.fixture
def tiny_alfworld(monkeypatch):
    """ALFWORLD_DATA -> the tiny folder; a stand-in `alfworld` module; scripted games."""
    monkeypatch.setitem(sys.modules, "alfworld", types.ModuleType("alfworld"))
    monkeypatch.setenv("ALFWORLD_DATA", str(TINY_DATA))
    monkeypatch.setattr(alfworld_module, "_start_env", ScriptedAlfredGame)
    monkeypatch.setattr(alfworld_module, "_replan", lambda tw_env: tw_env.remaining())
    return TINY_DATA


def test_tiny_data_layout_is_found_through_alfworld_data(tiny_alfworld):
    """Of the five train games, ALFWorld skips three (movable, unsolvable, no initial state)."""
    env = AlfworldEnv()
    assert env.data_dir == tiny_alfworld
    assert [p.parts[-3] for p in env.games["train"]] == TRAIN_GAMES  # sorted by path
    assert [p.parts[-3] for p in env.games["eval"]] == ["pick_clean_then_place_in_recep-Cloth-None-Cabinet-4"]
    unseen = AlfworldEnv(eval_split="eval_out_of_distribution")
    assert [p.parts[-3] for p in unseen.games["eval"]] == ["pick_heat_then_place_in_recep-Egg-None-Fridge-5"]
    check_available("alfworld")  # no error: package and data are there
    # one playable eval game per split: an eval of 2 episodes would replay it (exit 2 up front)
    from arena.envs import eval_size
    assert eval_size("alfworld") == eval_size("alfworld", eval_split="eval_out_of_distribution") == 1


def test_expert_plays_every_tiny_game(tiny_alfworld):
    """Seeds 0, 1 -> the two train games, eval_seed(0) -> the valid_seen game; the expert wins
    each in len(walkthrough) turns (4, 4, 6) with return 10 = 10 * won on the last turn."""
    env = make("alfworld")
    expected = {0: ("look_at_obj_in_light", "look at book under the desklamp.", 4),
                1: ("pick_and_place", "put a cloth in countertop.", 4),
                eval_seed(0): ("pick_clean_then_place_in_recep", "put a clean cloth in cabinet.", 6)}
    for seed, (kind, task, n_turns) in expected.items():
        obs, info = env.reset(seed)
        assert info["task_type"] == kind and info["task"] == task and obs.endswith("Your task is to: " + task)
        rewards, done = [], False
        while not done:
            _, reward, done, info = env.step(env.expert_action())
            rewards.append(reward)
        assert rewards == [0.0] * (n_turns - 1) + [10.0] and info["won"]


def test_no_op_and_cutoff_on_a_tiny_game(tiny_alfworld):
    """max_turns=2 on train game 1: 'dance' is a no-op ('Nothing happens.', r=0), then the first
    walkthrough command (r=0) ends the episode by the cutoff, not won."""
    env = AlfworldEnv(max_turns=2)
    env.reset(1)
    obs, reward, done, info = env.step("dance")
    assert (obs, reward, done, info["admissible"]) == (NO_OP_FEEDBACK, 0.0, False, False)
    obs, reward, done, info = env.step("go to drawer 1")
    assert obs.startswith("You arrive at drawer 1") and (reward, done, info["won"], info["truncated"]) == (0.0, True, False, True)


def test_cli_check_runs_on_the_tiny_data(tiny_alfworld, capsys):
    assert main(["envs", "check", "env=alfworld", "n=2"]) == 0
    assert "alfworld: expert success 1.000 over 2 seeds" in capsys.readouterr().out


def test_cli_exits_2_when_alfworld_is_missing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "alfworld", types.ModuleType("alfworld"))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    assert main(["envs", "check", "env=alfworld", "n=1"]) == 2
    assert "ALFWORLD_DATA is not set" in capsys.readouterr().err
    monkeypatch.setenv("ALFWORLD_DATA", "/nonexistent/alfworld")
    with pytest.raises(EnvUnavailableError, match="no ALFWorld data at /nonexistent/alfworld"):
        check_available("alfworld")
    monkeypatch.setitem(sys.modules, "alfworld", None)  # the package itself is missing
    assert main(["envs", "play", "env=alfworld"]) == 2
    assert "pip install 'arena[alfworld]'" in capsys.readouterr().err
    check_available("shop")  # environments without optional parts are always available


def test_train_and_sweep_exit_2_without_alfworld_data(monkeypatch, capsys, tmp_path):
    """The check runs before anything is trained or launched (arena.backends.check_trainable)."""
    monkeypatch.setitem(sys.modules, "alfworld", types.ModuleType("alfworld"))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    assert main(["train", "env=alfworld", "budget=smoke", f"results_dir={tmp_path}"]) == 2
    assert "ALFWORLD_DATA is not set" in capsys.readouterr().err
    assert main(["sweep", "dimension=is_clipping", "env=alfworld", "budget=smoke", "seeds=1",
                 f"results_dir={tmp_path}", "--dry-run"]) == 2
    assert "ALFWORLD_DATA is not set" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written
