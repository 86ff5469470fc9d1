"""Household task: pool, seeds, hand-worked rewards, cutoff, expert."""
from __future__ import annotations

import json

import pytest

from arena.envs import EVAL_SEED_OFFSET, Env, eval_seed, make
from arena.envs.household import HouseholdEnv, clean_household_text, first_observation
from arena.envs import household_games
from arena.envs.household_games import ARCHIVE_NAME, COMMITTED_POOL_DIR, MANIFEST_NAME, pool_specs, read_manifest
from arena.envs.textworld_episode import NO_OP_FEEDBACK

MANIFEST = json.loads((COMMITTED_POOL_DIR / MANIFEST_NAME).read_text())
TRAIN = [g for g in MANIFEST["games"] if g["split"] == "train"]
EVAL = [g for g in MANIFEST["games"] if g["split"] == "eval"]


@pytest.fixture(scope="module")
def env_factory(tmp_path_factory):
    cache = tmp_path_factory.mktemp("household-cache")
    return lambda **kw: HouseholdEnv(cache_dir=str(cache), **kw)


def play_expert(env, seed):
    """Follow expert_action() until done; return (total reward, won, turns)."""
    env.reset(seed)
    total, done, info = 0.0, False, {}
    while not done:
        action = env.expert_action()
        assert action is not None and env.is_admissible(action)
        _, reward, done, info = env.step(action)
        total += reward
    return total, info["won"], info["turn"]


def test_committed_pool_is_small_and_split_20_10():
    assert (COMMITTED_POOL_DIR / ARCHIVE_NAME).stat().st_size < 2_000_000
    assert len(TRAIN) == 20 and len(EVAL) == 10
    from arena.envs import eval_size
    assert eval_size("household") == len(EVAL)  # the limit of eval.n on the committed pool
    names = [g["name"] for g in MANIFEST["games"]]
    assert len(set(names)) == 30
    # Every size of the grid appears in both splits: rooms 2..5, quest length 1..4.
    for games in (TRAIN, EVAL):
        assert {g["world_size"] for g in games} == {2, 3, 4, 5}
        assert {g["quest_length"] for g in games} == {1, 2, 3, 4}
    # Each quest is exactly quest_length commands and ends by placing an object.
    for g in MANIFEST["games"]:
        assert len(g["walkthrough"]) == g["quest_length"]
        assert g["walkthrough"][-1].split()[0] in {"put", "insert"}


def test_registry_and_protocol_fields(env_factory):
    env = make("household", cache_dir=env_factory().games_dir.parent)
    assert isinstance(env, Env)
    assert env.name == "household" and env.max_turns == 15 and "Your task is to:" in env.instruction


def test_unknown_pool_lists_the_valid_ones():
    with pytest.raises(ValueError, match="committed, large"):
        HouseholdEnv(pool="huge")


def test_seeds_map_into_their_split_and_reproduce(env_factory):
    env = env_factory()
    # Train seed s -> train game s mod 20; eval_seed(i) -> eval game i mod 10.
    assert env.game_for_seed(3)["name"] == TRAIN[3]["name"] == "g004_w2_q2"
    assert env.game_for_seed(23)["name"] == TRAIN[3]["name"]
    assert env.game_for_seed(eval_seed(12))["name"] == EVAL[2]["name"] == "g008_w2_q3"
    train_games = {env.game_for_seed(s)["name"] for s in range(100)}
    eval_games = {env.game_for_seed(eval_seed(i))["name"] for i in range(100)}
    assert len(train_games) == 20 and len(eval_games) == 10 and not train_games & eval_games
    assert EVAL_SEED_OFFSET - 1 < eval_seed(0)
    with pytest.raises(ValueError):
        env.game_for_seed(-1)
    # Same seed, two env objects: identical first observation and admissible actions.
    other = env_factory()
    for seed in (5, eval_seed(4)):
        assert env.reset(seed) == other.reset(seed)


def test_hand_worked_episode_on_g004(env_factory):
    """g004_w2_q2 (train seed 3): walkthrough = take insect from mantelpiece, put insect on shelf.

    Turn 1 'dance' is not admissible: no-op, 'Nothing happens.', r=0.
    Turn 2 takes the insect: r=0, not done. Turn 3 puts it on the shelf: won, r = 10 * 1 = 10.
    Episode return = 0 + 0 + 10 = 10 = 10 * won.
    """
    env = env_factory()
    obs, info = env.reset(3)
    assert obs.startswith("-= Study =-") and "$$" not in obs and "0/1" not in obs
    assert obs.endswith("After that, put the insect on the shelf. Got that? Good!")
    assert "\n\nYour task is to: It's time to explore" in obs
    assert info["won"] is False and info["game"] == "g004_w2_q2"
    assert info["admissible_actions"] == [
        "close box", "examine box", "examine insect", "examine mantelpiece", "examine shelf",
        "go west", "inventory", "look", "take insect from mantelpiece"]
    assert env.expert_action() == "take insect from mantelpiece"

    assert not env.is_admissible("dance")
    obs, reward, done, info = env.step("dance")
    assert (obs, reward, done, info["won"], info["turn"]) == (NO_OP_FEEDBACK, 0.0, False, False, 1)
    assert info["admissible"] is False

    assert env.is_admissible("  Take Insect from Mantelpiece ")  # lowercased and stripped
    obs, reward, done, info = env.step("  Take Insect from Mantelpiece ")
    assert (obs, reward, done, info["won"]) == ("You take the insect from the mantelpiece.", 0.0, False, False)
    assert "put insect on shelf" in info["admissible_actions"]
    assert env.expert_action() == "put insect on shelf"

    obs, reward, done, info = env.step("put insect on shelf")
    assert (obs, reward, done, info["won"], info["turn"]) == ("You put the insect on the shelf.", 10.0, True, True, 3)
    assert info["truncated"] is False and env.expert_action() is None and not env.is_admissible("look")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")


def test_max_turns_cutoff(env_factory):
    """max_turns=3: three 'look' turns; done only after the third, not won, reward 0 throughout."""
    env = env_factory(max_turns=3)
    env.reset(3)
    results = [env.step("look") for _ in range(3)]
    assert [r[2] for r in results] == [False, False, True]
    assert [r[1] for r in results] == [0.0, 0.0, 0.0]
    assert results[-1][3]["won"] is False and results[-1][3]["truncated"] is True


def test_expert_replans_after_a_deviation(env_factory):
    """g006_w4_q2 (seed 4): the walkthrough starts with 'go east'; going south first deviates."""
    env = env_factory()
    env.reset(4)
    assert env.expert_action() == "go east"
    env.step("go south")
    assert env.expert_action() == "go north"  # the re-plan walks back first
    total, done = 0.0, False
    while not done:
        _, reward, done, info = env.step(env.expert_action())
        total += reward
    assert info["won"] and total == 10.0 and info["turn"] == 4  # south, north, east, put


def test_expert_wins_every_committed_game(env_factory):
    """The walkthrough wins all 30 games in exactly len(walkthrough) turns, return 10 (~4 s)."""
    env = env_factory()
    seeds = list(range(len(TRAIN))) + [eval_seed(i) for i in range(len(EVAL))]
    for seed in seeds:
        total, won, turns = play_expert(env, seed)
        assert (total, won, turns) == (10.0, True, len(env.game["walkthrough"])), env.game["name"]


def test_clean_household_text():
    raw = ("\n\n   $$$$ \\$$  |  $$\n     ___/ \n\nHello there!\n-= Study =-\nA room.\n\n\n\n"
           "Your score has just gone up by one point.\n\n  *** The End ***\n\nYou scored 1\n"
           ">                       -= Study =-1/3")
    assert clean_household_text(raw) == "Hello there!\n-= Study =-\nA room."
    assert clean_household_text("\nYou take it.\n\n\n\n>    -= Den =-0/2") == "You take it."
    assert first_observation("Do X now!\n\n-= Den =-\nA den.\n>  -= Den =-0/1", "Do X now!") == (
        "-= Den =-\nA den.\n\nYour task is to: Do X now!")


@pytest.mark.slow
def test_generated_pool_is_made_once_reused_and_playable(tmp_path, monkeypatch):
    """Real TextWorld: a 2-game pool (first seed 7), then a 3-game pool beside it that copies the
    2 finished games (same walkthroughs, same story bytes) and generates only game 2 (eval);
    the env plays all three through to a win, and a second env regenerates nothing."""
    first = household_games.ensure_generated_pool(tmp_path, n_games=2, first_seed=7)
    lines = []
    bigger = household_games.ensure_pool(tmp_path / "bigger", pool_specs(3, first_seed=7), log=lines.append)
    assert "reused 2 finished games" in lines[-1] and sum("generated game" in line for line in lines) == 1
    old, new = read_manifest(first)["games"], read_manifest(bigger)["games"]
    assert [g["walkthrough"] for g in new[:2]] == [g["walkthrough"] for g in old]
    assert (bigger / "g000_w2_q1.z8").read_bytes() == (first / "g000_w2_q1.z8").read_bytes()
    monkeypatch.setattr("arena.envs.household.ensure_large_pool", lambda cache, **_: bigger)
    env = HouseholdEnv(pool="large", cache_dir=str(tmp_path), n_large=768)
    stamp = (bigger / MANIFEST_NAME).stat().st_mtime_ns
    assert [len(env.games[k]) for k in ("train", "val", "eval")] == [2, 0, 1]
    for seed in (0, 1, eval_seed(0)):
        total, won, _ = play_expert(env, seed)
        assert (total, won) == (10.0, True)
    household_games.ensure_pool(tmp_path / "bigger", pool_specs(3, first_seed=7), log=lines.append)
    assert (bigger / MANIFEST_NAME).stat().st_mtime_ns == stamp


def test_large_pool_specs_split_whole_grids():
    """512 games, eval_every 2, blocks of 16: games 16-31, 48-63, ... are eval -> 256 / 256,
    and each block is one whole 4 x 4 grid of (rooms, quest length), so both splits cover all."""
    specs = pool_specs(512, first_seed=1001, eval_every=2, split_block=16)
    train = [s for s in specs if s["split"] == "train"]
    evals = [s for s in specs if s["split"] == "eval"]
    assert len(train) == len(evals) == 256
    assert [s["split"] for s in specs[14:18]] == ["train", "train", "eval", "eval"]
    for games in (train, evals):
        assert {(g["world_size"], g["quest_length"]) for g in games} == {(w, q) for w in range(2, 6) for q in range(1, 5)}
    # the committed pool's rule is unchanged: every third game
    assert [s["split"] for s in pool_specs(6)] == ["train", "train", "eval"] * 2
    with pytest.raises(ValueError):
        pool_specs(4, eval_every=1)


def test_generation_reports_progress_and_resumes(tmp_path, monkeypatch):
    """With a fake 'generate_game' (no TextWorld): 3 games -> progress lines with an ETA; a
    second call after losing the manifest regenerates nothing (the entries survive)."""
    calls = []

    def fake_generate(out_dir, spec):
        calls.append(spec["name"])
        (out_dir / f"{spec['name']}.z8").write_bytes(b"z")
        return dict(spec, walkthrough=["take x", "put x on y"])

    monkeypatch.setattr(household_games, "generate_game", fake_generate)
    lines = []
    pool = household_games.ensure_generated_pool(tmp_path, n_games=3, first_seed=7, log=lines.append)
    assert calls == ["g000_w2_q1", "g001_w3_q1", "g002_w4_q1"]
    assert lines[0].startswith("[household] making 3 games")
    assert lines[-1].startswith("[household] generated game 3/3") and "ETA 0.0 min" in lines[-1]
    manifest = read_manifest(pool)
    assert [g["split"] for g in manifest["games"]] == ["train", "train", "eval"]
    (pool / MANIFEST_NAME).unlink()  # as if interrupted before the manifest
    household_games.ensure_generated_pool(tmp_path, n_games=3, first_seed=7, log=lines.append)
    assert len(calls) == 3 and read_manifest(pool) == manifest
