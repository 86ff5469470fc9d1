"""Household games are played only when their files match the digests recorded for them
(arena/envs/household_games.py, verified_game): a swapped or truncated game is made again
(extracted again, or regenerated) before it is played, and never crashes the run."""
from __future__ import annotations

import json
import shutil

import pytest

from arena.envs import household_games as hg
from arena.envs.household import HouseholdEnv

pytest.importorskip("textworld")


@pytest.fixture(autouse=True)
def fresh_process_state(monkeypatch):
    monkeypatch.setattr(hg, "_VERIFIED", set())  # "first use in this process" for each test


def _first_obs(env, seed):
    return env.reset(seed)[0]


def test_a_swapped_or_truncated_extracted_game_is_extracted_again_not_played(tmp_path):
    env = HouseholdEnv(cache_dir=str(tmp_path))
    a, b = env.games["train"][0]["name"], env.games["train"][1]["name"]
    want_a, want_b = _first_obs(env, 0), _first_obs(env, 1)  # train seed s -> train game s mod n_train
    assert want_a != want_b
    games = env.games_dir
    assert json.loads((games / hg.DIGESTS_NAME).read_text())[a + ".z8"] == hg.file_sha256(games / (a + ".z8"))
    # swap a's and b's files, and truncate another game: a fresh process must not play them as they are
    for ext in hg.GAME_FILE_SUFFIXES:
        shutil.move(games / (a + ext), tmp_path / "x")
        shutil.move(games / (b + ext), games / (a + ext))
        shutil.move(tmp_path / "x", games / (b + ext))
    c = env.games["train"][2]["name"]
    story = (games / (c + ".z8")).read_bytes()
    (games / (c + ".z8")).write_bytes(story[: len(story) // 3])
    hg._VERIFIED.clear()
    logs = []
    fresh = HouseholdEnv(cache_dir=str(tmp_path))
    hg.verified_game(fresh.pool_dir, fresh.games_dir, fresh.manifest, fresh.games["train"][0], log=logs.append)
    assert any("differs from its recorded sha256" in line for line in logs)
    assert _first_obs(fresh, 0) == want_a and _first_obs(fresh, 1) == want_b
    fresh.reset(2)  # the truncated game was extracted again: it starts, no crash
    assert (games / (c + ".z8")).read_bytes() == story


def test_a_swapped_generated_game_is_regenerated_and_its_digest_recorded(tmp_path, monkeypatch):
    # "generation" copies the committed pool's game of the same name (pool_specs names them alike)
    committed = HouseholdEnv(cache_dir=str(tmp_path / "cache"))
    by_name = {g["name"]: g for split in committed.games.values() for g in split}
    made = []

    def fake_generate(out_dir, spec, max_tries=20):
        for ext in hg.GAME_FILE_SUFFIXES:
            shutil.copyfile(committed.games_dir / (spec["name"] + ext), out_dir / (spec["name"] + ext))
        made.append(spec["name"])
        return dict(spec, walkthrough=by_name[spec["name"]]["walkthrough"])

    monkeypatch.setattr(hg, "generate_game", fake_generate)
    pool = tmp_path / "pools" / "p"
    specs = hg.pool_specs(3)
    hg.build_pool(pool, specs, archive=False, log=lambda *a: None)
    manifest = hg.read_manifest(pool)
    entry0, entry1 = manifest["games"][0], manifest["games"][1]
    assert entry0["sha256"] == hg.game_digests(pool, entry0["name"]) and len(made) == 3
    for ext in hg.GAME_FILE_SUFFIXES:  # game 0's files replaced by game 1's
        shutil.copyfile(pool / (entry1["name"] + ext), pool / (entry0["name"] + ext))
    assert hg.verified_game(pool, pool, manifest, entry0, log=lambda *a: None) is entry0
    assert made[3:] == [entry0["name"]]  # regenerated, once
    assert hg.game_problem(pool, entry0["name"], hg.read_manifest(pool)["games"][0]["sha256"]) is None
    hg.verified_game(pool, pool, manifest, entry0)  # checked once per process: no second look
    assert len(made) == 4
    # a game without a recorded digest (an older pool) is no proof either
    del entry1["sha256"]
    hg.verified_game(pool, pool, manifest, entry1, log=lambda *a: None)
    assert made[4:] == [entry1["name"]] and "sha256" in entry1


def test_a_donor_game_that_is_not_provably_intact_is_not_reused(tmp_path, monkeypatch):
    made = []

    def fake_generate(out_dir, spec, max_tries=20):
        for ext in hg.GAME_FILE_SUFFIXES:
            (out_dir / (spec["name"] + ext)).write_bytes(b"fresh " + spec["name"].encode())
        made.append(spec["name"])
        return dict(spec, walkthrough=["made"])

    monkeypatch.setattr(hg, "generate_game", fake_generate)
    specs = hg.pool_specs(2, first_seed=7)
    hg.build_pool(tmp_path / "old", specs, archive=False, log=lambda *a: None)
    (tmp_path / "old" / f"{specs[0]['name']}.z8").write_bytes(b"corrupted")  # donor game 0 damaged
    entry1 = tmp_path / "old" / f"{specs[1]['name']}{hg.ENTRY_SUFFIX}"
    entry1.write_text(json.dumps({k: v for k, v in json.loads(entry1.read_text()).items() if k != "sha256"}))
    made.clear()
    hg.ensure_pool(tmp_path / "new", specs, log=lambda *a: None)
    assert made == [s["name"] for s in specs]  # neither the damaged nor the undigested game was copied
