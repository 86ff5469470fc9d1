"""Stray ARENA_* environment variables (arena/env_vars.py, docs/design.md, Environment
variables): bad values exit 2 with the valid range, a shell's hand-off variables cannot replace
the recorded commit, test hooks are announced and recorded, unknown names are warned about,
and a grid shadowing a shipped one is announced."""
from __future__ import annotations

import json
import os

import pytest

from arena.cli import main
from arena.env_vars import ENV_VARS
from arena.runs.provenance import provenance


@pytest.mark.parametrize("name, value, valid", [
    ("ARENA_HEARTBEAT_S", "0", "a number in [0.1, 3600]"), ("ARENA_HEARTBEAT_S", "nan", "a number in [0.1, 3600]"),
    ("ARENA_MAX_PARALLEL", "0", "an integer >= 1"), ("ARENA_CRASH_AT", "summary.json", "<point>:<n>"),
    ("ARENA_GRIDS", "/no/such/dir", "existing directories"), ("ARENA_MALLOC_TUNING", "off", "0 or 1")])
def test_a_bad_value_exits_2_with_the_valid_range(monkeypatch, capsys, name, value, valid):
    monkeypatch.setenv(name, value)
    assert main(["methods"]) == 2
    err = capsys.readouterr().err
    assert f"{name}={value!r}: valid: {valid}" in err and "Traceback" not in err


def test_an_empty_value_counts_as_unset(monkeypatch, capsys):
    monkeypatch.setenv("ARENA_CRASH_AT", "")  # as the kill tests pass it for an undisturbed run
    monkeypatch.setenv("ARENA_HEARTBEAT_S", "")
    assert main(["methods"]) == 0
    assert "ARENA_" not in capsys.readouterr().err and provenance()["test_hooks"] == {}


def test_a_commit_from_the_shell_does_not_replace_the_recorded_one(monkeypatch, capsys):
    monkeypatch.setenv("ARENA_GIT_SHA", "c" * 40)
    monkeypatch.setenv("ARENA_GIT_DIRTY", "0")
    assert main(["methods"]) == 0
    assert "NOTICE: ARENA_GIT_SHA is set in this shell" in capsys.readouterr().err
    assert "ARENA_GIT_SHA" not in os.environ and provenance()["git_sha"] != "c" * 40


def test_a_test_hook_is_announced_and_recorded_in_summary_json(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ARENA_CRASH_AT", "no_such_point:1")  # a point never reached: the run completes
    assert main(["methods"]) == 0
    assert "NOTICE: TEST HOOK ARENA_CRASH_AT=no_such_point:1" in capsys.readouterr().err
    assert provenance()["test_hooks"] == {"ARENA_CRASH_AT": "no_such_point:1"}
    out = tmp_path / "run"
    args = ["train", "env=sanity", "budget=smoke", "steps=1", "wandb.enabled=false", f"out={out}",
            f"results_dir={tmp_path}", "eval.n=2", "bc.demos=8", "bc.steps=2", "bc.eval_n=2"]
    assert main(args) == 0
    assert json.loads((out / "summary.json").read_text())["test_hooks"] == {"ARENA_CRASH_AT": "no_such_point:1"}


def test_an_unknown_name_is_warned_about_with_did_you_mean_and_no_value(monkeypatch, capsys):
    monkeypatch.setenv("ARENA_HEARTBEAT", "secret-ish-value")
    assert main(["methods"]) == 0
    err = capsys.readouterr().err
    assert "unknown environment variable ARENA_HEARTBEAT is ignored; did you mean ARENA_HEARTBEAT_S?" in err
    assert "secret-ish-value" not in err


def test_a_grid_shadowing_a_shipped_one_is_announced(monkeypatch, capsys, tmp_path):
    from arena.sweeps.grids import grid_path

    (tmp_path / "advantage.yaml").write_text("- name: mine\n")
    monkeypatch.setenv("ARENA_GRIDS", str(tmp_path))
    assert grid_path("advantage") == tmp_path / "advantage.yaml"
    assert "shadows the shipped grid" in capsys.readouterr().err


def test_the_table_names_every_arena_variable_the_package_reads():
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "arena"
    read = {m for p in package.rglob("*.py") if p.name != "env_vars.py"
            for m in re.findall(r"\bARENA_[A-Z_]+\b", p.read_text())}
    read -= {"ARENA_ROLLOUT_MODULE"}  # a Python constant (a module name), not a variable
    assert read <= {v.name for v in ENV_VARS}, read - {v.name for v in ENV_VARS}
