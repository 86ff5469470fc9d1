import pytest

from arena.po.methods import METHODS
from arena.sweeps.grids import available_dimensions, load_grid, override_strings, parse_envs, parse_seeds


def test_parse_seeds_count_and_list():
    assert parse_seeds(3) == [0, 1, 2]
    assert parse_seeds([0, 5, 9]) == [0, 5, 9]
    for bad in (0, -1, [], [1, 1], "x", True, [0.5]):
        with pytest.raises(ValueError, match="seeds"):
            parse_seeds(bad)


def test_parse_envs():
    assert parse_envs("sokoban") == ["sokoban"]
    assert parse_envs(["sokoban", "alfworld"]) == ["sokoban", "alfworld"]
    with pytest.raises(ValueError, match="env"):
        parse_envs(3)


def test_shipped_grids_have_the_issue_arms():
    assert set(available_dimensions()) >= {"aggregation", "is_clipping", "filtering", "advantage", "sampo", "off_policy", "all"}
    names = lambda d: [a["name"] for a in load_grid(d)]  # noqa: E731
    assert names("is_clipping") == ["grpo", "gspo", "cispo", "sapo", "cispo_sm", "sapo_sm"]
    assert names("aggregation") == ["grpo", "grpo_st"]
    assert names("filtering") == ["grpo", "grpo_ds", "gigpo", "gigpo_ds"]
    assert names("advantage") == ["grpo", "gigpo", "empg"]
    assert names("sampo") == ["grpo", "sampo", "sampo_no_gspo", "sampo_no_gigpo", "sampo_no_ds"]
    assert sorted(a["po.method"] for a in load_grid("all")) == sorted(METHODS)
    off = load_grid("off_policy")
    assert sorted((a["po.method"], a["ppo_num_mini_batches"]) for a in off) == [
        ("cispo", 1), ("cispo", 4), ("cispo", 8), ("grpo", 1), ("grpo", 4), ("grpo", 8)]


def test_user_grid_dir(tmp_path, monkeypatch):
    (tmp_path / "mine.yaml").write_text("arms:\n  - {name: a, po.method: gspo}\n")
    monkeypatch.setenv("ARENA_GRIDS", str(tmp_path))
    assert "mine" in available_dimensions()
    assert load_grid("mine") == [{"name": "a", "po.method": "gspo"}]
    with pytest.raises(ValueError, match="valid: .*is_clipping"):
        load_grid("nope")


def test_override_strings():
    assert override_strings({"po.method": "gspo", "steps": 5, "po.seq_mask_delta": None, "fail_fast": True}) == [
        "po.method=gspo", "steps=5", "po.seq_mask_delta=null", "fail_fast=true"]
