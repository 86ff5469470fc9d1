"""The large household pool: its train / val / eval splits, the seed -> game map, the reuse of
games other pools already made, and exit 2 on a bad pool name or size (no TextWorld needed)."""
from __future__ import annotations

import json

import pytest

from arena.cli import main
from arena.envs import eval_seed
from arena.envs import household_games
from arena.envs import check_available
from arena.envs.household import VAL_SEED_OFFSET, BadHouseholdPool, HouseholdEnv
from arena.envs.household_games import (ENTRY_SUFFIX, EXTRA_EVAL_SEED_OFFSET, LARGE_SIZES, MANIFEST_NAME,
                                        RETRY_SEED_STEP, ensure_large_pool, ensure_pool, extra_eval_specs,
                                        large_pool_name, large_pool_specs, pool_specs, read_manifest,
                                        reusable_games, same_game)

GRID = {(w, q) for w in range(2, 6) for q in range(1, 5)}  # rooms 2-5 x quest length 1-4


def test_large_pool_splits_are_whole_grids_and_extend_the_512_pool():
    """Hand-derived: game i is eval iff i < 512 and (i // 16) odd; val iff 512 <= i < 768;
    train otherwise. n = 1536: 256 eval (16 odd blocks of 32), 256 val, 256 + 768 = 1024 train."""
    specs = large_pool_specs(1536)
    by_split = {split: [s for s in specs if s["split"] == split] for split in ("train", "val", "eval")}
    assert [len(by_split[k]) for k in ("train", "val", "eval")] == [1024, 256, 256]
    for games in by_split.values():  # every split holds whole grids: each (rooms, quest) size equally often
        sizes = [(g["world_size"], g["quest_length"]) for g in games]
        assert set(sizes) == GRID and len({sizes.count(size) for size in GRID}) == 1
    assert [s["split"] for s in specs[14:18]] == ["train", "train", "eval", "eval"]
    assert [s["split"] for s in specs[510:514]] == ["eval", "eval", "val", "val"]  # block 31 is odd
    assert [s["split"] for s in specs[766:770]] == ["val", "val", "train", "train"]
    # game 1000: rooms 2 + 1000 % 4 = 2, quest 1 + (1000 // 4) % 4 = 1 + 250 % 4 = 3, seed 1001 + 1000
    assert (specs[1000]["name"], specs[1000]["seed"], specs[1000]["nb_objects"]) == ("g1000_w2_q3", 2001, 6)
    # the first 512 games are the earlier 512-game pool, split included: its cache is reused
    assert specs[:512] == pool_specs(512, first_seed=1001, eval_every=2, split_block=16)
    assert large_pool_specs(768) == specs[:768]  # a smaller pool is a prefix
    assert LARGE_SIZES[:3] == (768, 1024, 1280) and LARGE_SIZES[-1] == 4096
    with pytest.raises(ValueError, match="768, 1024, 1280"):
        large_pool_specs(1000)


def test_same_game_needs_equal_sizes_and_a_seed_on_the_retry_ladder():
    spec = dict(name="g005_w3_q2", world_size=3, nb_objects=8, quest_length=2, seed=1006, split="val")
    entry = dict(spec, split="train", walkthrough=["go east", "put x on y"])
    assert same_game(entry, spec)  # the split is not part of the game
    assert same_game(dict(entry, seed=21006), spec)  # two failed quests: 1006 + 2 * 10000
    assert not same_game(dict(entry, seed=1007), spec)  # another pool's first seed
    assert not same_game(dict(entry, seed=6), spec)  # below the spec's seed: k = -0.1
    assert not same_game(dict(entry, nb_objects=9), spec)


def _fake_game(folder, spec, walkthrough=("take x", "put x on y"), entry=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{spec['name']}.z8").write_bytes(b"story " + spec["name"].encode())
    (folder / f"{spec['name']}.json").write_text("{}")
    if entry:  # a finished game's entry records its files' digests (household_games.generate_games)
        digests = household_games.game_digests(folder, spec["name"])
        (folder / f"{spec['name']}{ENTRY_SUFFIX}").write_text(json.dumps(dict(spec, walkthrough=list(walkthrough),
                                                                               sha256=digests)))


def _fake_generator(monkeypatch) -> list[str]:
    """household_games.generate_game writes a fake game (walkthrough ["made"], no entry file: the
    caller writes it); returns the list the names of the games it makes are appended to."""
    made = []

    def fake_generate(out_dir, spec):
        made.append(spec["name"])
        _fake_game(out_dir, spec, walkthrough=["made"], entry=False)
        return dict(spec, walkthrough=["made"])

    monkeypatch.setattr(household_games, "generate_game", fake_generate)
    return made


def test_new_pool_copies_matching_finished_games_and_generates_the_rest(tmp_path, monkeypatch):
    """Donor folder `old` (other split rule, same first seed 7) finished g000 and g001 and began
    g002 (story file, no entry); folder `alien` holds g003 made from another seed (107 != 10).
    A 4-game pool must copy g000 and g001 (hard links, its own split), generate g002 and g003."""
    calls = _fake_generator(monkeypatch)
    old_specs = pool_specs(4, first_seed=7, eval_every=2, split_block=1)  # splits train, eval, train, eval
    for spec in old_specs[:2]:
        _fake_game(tmp_path / "old", spec)
    _fake_game(tmp_path / "old", old_specs[2], entry=False)
    _fake_game(tmp_path / "alien", pool_specs(4, first_seed=104)[3])
    assert sorted(reusable_games(tmp_path, skip=tmp_path / "new")) == ["g000_w2_q1", "g001_w3_q1", "g003_w5_q1"]

    lines = []
    new_specs = pool_specs(4, first_seed=7)  # eval_every 3: train, train, eval, train
    pool = ensure_pool(tmp_path / "new", new_specs, log=lines.append)
    assert calls == ["g002_w4_q1", "g003_w5_q1"]
    games = read_manifest(pool)["games"]
    assert [g["split"] for g in games] == ["train", "train", "eval", "train"]  # the new pool's splits
    assert [g["walkthrough"] for g in games] == [["take x", "put x on y"]] * 2 + [["made"]] * 2
    for name in ("g000_w2_q1", "g001_w3_q1"):
        assert (pool / f"{name}.z8").stat().st_ino == (tmp_path / "old" / f"{name}.z8").stat().st_ino
    assert "reused 2 finished games" in lines[-1]
    # a second call finds the manifest and makes nothing
    ensure_pool(tmp_path / "new", new_specs, log=lines.append)
    assert len(calls) == 2


def _write_manifest(folder, specs):
    folder.mkdir(parents=True)
    games = [dict(s, walkthrough=["put x on y"]) for s in specs]
    (folder / MANIFEST_NAME).write_text(json.dumps(dict(archive=None, games=games)))


def test_validation_seeds_play_validation_games(tmp_path):
    """A 768-game large pool (manifest only: game_for_seed opens no game). Hand-derived:
    eval_seed(3) -> eval game 3 = game 19 (block 1 is 16-31): rooms 2 + 19 % 4 = 5, quest 1 + 4 % 4 = 1.
    VAL_SEED_OFFSET + 5 -> val game 5 = game 517: rooms 2 + 1 = 3, quest 1 + 129 % 4 = 2.
    VAL_SEED_OFFSET + 256 (past the 256 val games) -> train game 500256 mod 256 = 32, the first
    game of block 4 = game 64 (rooms 2, quest 1 + 16 % 4 = 1). Seed 3 -> train game 3 = game 3."""
    _write_manifest(tmp_path / "large-n768-s1001", large_pool_specs(768))
    env = HouseholdEnv(pool="large", cache_dir=str(tmp_path), n_large=768)
    assert [len(env.games[k]) for k in ("train", "val", "eval")] == [256, 256, 256]
    assert env.game_for_seed(eval_seed(3))["name"] == "g019_w5_q1"
    assert env.game_for_seed(VAL_SEED_OFFSET + 5)["name"] == "g517_w3_q2"
    assert env.game_for_seed(VAL_SEED_OFFSET + 256)["name"] == "g064_w2_q1"
    assert env.game_for_seed(3)["name"] == "g003_w5_q1"
    # BC's band checks exactly the validation games: disjoint from demo (train) and eval games
    from arena.bc.stop import VAL_SEED_OFFSET as BAND_OFFSET, val_seeds
    assert BAND_OFFSET == VAL_SEED_OFFSET
    val = {env.game_for_seed(s)["name"] for s in val_seeds(256)}
    train = {env.game_for_seed(s)["name"] for s in range(256)}
    evals = {env.game_for_seed(eval_seed(i))["name"] for i in range(256)}
    assert len(val) == len(train) == len(evals) == 256 and not (val & train or val & evals or train & evals)


def test_bad_pool_name_or_size_exits_2_with_the_valid_values(capsys):
    with pytest.raises(BadHouseholdPool, match="1536"):
        check_available("household", pool="large", n_large=1000)
    check_available("household", pool="committed", n_large=1000)  # the size only matters for the large pool
    assert main(["envs", "check", "env=household", "pool=huge"]) == 2
    assert "valid: committed, large" in capsys.readouterr().err
    assert main(["envs", "check", "env=household", "pool=large", "n_large=1000"]) == 2
    assert "valid: 768, 1024, 1280, 1536" in capsys.readouterr().err
    assert main(["train", "env=household", "env.kwargs.pool=large", "env.kwargs.n_large=512"]) == 2
    err = capsys.readouterr().err
    assert "n_large=512" in err and "valid: 768, 1024" in err


def test_band_stop_never_validates_on_training_games(tmp_path, capsys):
    """validation_size is the pool's real validation split (the 768-game pool's manifest has
    256 val games, like every large pool: games [512, 768)); bc.val_n above it exits 2 before
    anything runs, since seeds VAL_SEED_OFFSET + 256.. would play training games (the test above).
    The committed pool has no validation games: 0, allowed (BC logs it and bc.json says
    val_split=train)."""
    from arena.envs import validation_size
    _write_manifest(tmp_path / "large-n768-s1001", large_pool_specs(768))
    env = HouseholdEnv(pool="large", cache_dir=str(tmp_path), n_large=768)
    assert validation_size("household", pool="large", n_large=768) == len(env.games["val"]) == 256
    assert validation_size("household", pool="large") == 256
    assert validation_size("household") == 0 and validation_size("sokoban", dim=7) is None
    args = ["bc", "env=household", "budget=default", f"results_dir={tmp_path}"]  # household_default: pool=large, a band
    assert main(args + ["bc.val_n=300"]) == 2
    err = capsys.readouterr().err
    assert "bc.val_n=300" in err and "valid: bc.val_n <= 256" in err
    assert not (tmp_path / "bc").exists()  # nothing written
    # a fixed-step BC (no band) or a given model (no BC) does not validate: no refusal
    from arena.config import check_env_available, load_config
    check_env_available(load_config(["env=household", "env.kwargs.pool=large", "bc.band=[]", "bc.val_n=300"]))
    check_env_available(load_config(["env=household", "env.kwargs.pool=large", "budget=learn",
                                     "bc.val_n=300", f"model.path={tmp_path}"]))


def test_extra_eval_games_come_from_seeds_no_training_game_uses():
    """Hand-derived: extra game j = 5 has rooms 2 + 5 % 4 = 3, quest 1 + (5 // 4) % 4 = 2,
    2 * 3 + 2 = 8 objects, seed 1001 + 1_000_000 + 5. The largest pool's training seeds with
    their retries reach at most 1001 + 4095 + 19 * 10_000 = 195_096 < 1_001_001."""
    specs = extra_eval_specs(512)
    assert len(specs) == 256 and extra_eval_specs(256) == []
    assert specs[5] == dict(name="x005_w3_q2", world_size=3, nb_objects=8, quest_length=2,
                            seed=1001 + EXTRA_EVAL_SEED_OFFSET + 5, split="eval")
    sizes = [(g["world_size"], g["quest_length"]) for g in specs]
    assert set(sizes) == GRID and len({sizes.count(size) for size in GRID}) == 1  # 16 whole grids
    assert 1001 + max(LARGE_SIZES) - 1 + 19 * RETRY_SEED_STEP < min(g["seed"] for g in specs)
    with pytest.raises(ValueError, match="256, 512, 768"):
        extra_eval_specs(300)
    assert large_pool_name(768, 1001) == "large-n768-s1001"
    assert large_pool_name(768, 1001, 512) == "large-n768-s1001-e512"


def test_a_pool_with_extra_eval_games_keeps_every_other_game_and_adds_eval_games(tmp_path, monkeypatch):
    """The 768-game pool exists (fake games); the same pool with n_eval=512 copies its 768 games and
    generates only the 256 extra ones. Seeds: eval_seed(3) -> eval game 3 = g019_w5_q1 as before;
    eval_seed(256 + 5) -> extra game 5 = x005_w3_q2; eval_seed(512) wraps to eval game 0 = game 16
    (rooms 2 + 16 % 4 = 2, quest 1 + 4 % 4 = 1); validation and training seeds play what they did."""
    made = _fake_generator(monkeypatch)
    ensure_large_pool(tmp_path, n_games=768, first_seed=1001, log=lambda line: None)
    assert len(made) == 768
    made.clear()
    pool = ensure_large_pool(tmp_path, n_games=768, first_seed=1001, n_eval=512, log=lambda line: None)
    assert pool.name == "large-n768-s1001-e512" and len(made) == 256 and all(n.startswith("x") for n in made)
    env = HouseholdEnv(pool="large", cache_dir=str(tmp_path), n_large=768, n_eval=512)
    assert [len(env.games[k]) for k in ("train", "val", "eval")] == [256, 256, 512]
    assert env.game_for_seed(eval_seed(3))["name"] == "g019_w5_q1"
    assert env.game_for_seed(eval_seed(261))["name"] == "x005_w3_q2"
    assert env.game_for_seed(eval_seed(512))["name"] == "g016_w2_q1"
    assert env.game_for_seed(VAL_SEED_OFFSET + 5)["name"] == "g517_w3_q2"
    assert env.game_for_seed(3)["name"] == "g003_w5_q1"


def test_bad_eval_size_exits_2_with_the_valid_values(capsys):
    with pytest.raises(BadHouseholdPool, match="256, 512"):
        check_available("household", pool="large", n_eval=300)
    with pytest.raises(BadHouseholdPool, match="needs env.kwargs.pool=large"):
        check_available("household", pool="committed", n_eval=512)
    assert main(["envs", "check", "env=household", "pool=large", "n_eval=300"]) == 2
    assert "valid: 256, 512, 768" in capsys.readouterr().err


def test_first_use_notice_says_what_the_large_pool_will_generate(tmp_path):
    from arena.envs import first_use_notice
    from arena.envs.household_games import MANIFEST_NAME, large_pool_name
    # 1536 games x 0.6-1.7 s = 921.6-2611.2 s = 15.4-43.5 min -> "~15-44 min"; with n_eval=1024 the
    # pool holds 768 more eval games: 2304 x 0.6-1.7 s = 23.0-65.3 min -> "~23-65 min"
    notice = first_use_notice("household", pool="large", cache_dir=str(tmp_path))
    assert "up to 1536 games (~15-44 min of one core" in notice and str(tmp_path / "large-n1536-s1001") in notice
    assert "up to 2304 games (~23-65 min" in first_use_notice("household", pool="large", n_eval=1024, cache_dir=str(tmp_path))
    # a finished pool (its manifest), the committed pool and other environments: nothing to say
    (tmp_path / large_pool_name(1536, 1001)).mkdir()
    (tmp_path / large_pool_name(1536, 1001) / MANIFEST_NAME).write_text("{}")
    assert first_use_notice("household", pool="large", cache_dir=str(tmp_path)) is None
    assert first_use_notice("household") is None and first_use_notice("sokoban") is None
