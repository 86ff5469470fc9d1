"""The driver with the fake train fn and the in-process debug launcher."""
import json
from pathlib import Path

import pytest

from arena.sweeps.cli import status_main, sweep_main
from arena.runs.lock import CellLock

from . import fake_train


def _sweep(args, **kw):
    return sweep_main(args, train_fn=fake_train.train, bc_fn=fake_train.bc, log=lambda *_: None, **kw)


def _manifest(tmp_path, name):
    return json.loads((tmp_path / "sweeps" / name / "manifest.json").read_text())


def _calls(tmp_path, name):
    cells = tmp_path / "sweeps" / name / "cells"
    return {p.name: len((p / "calls.log").read_text().split()) for p in cells.iterdir() if (p / "calls.log").exists()}


def test_manifest_and_cells(sweep_env, tmp_path):
    assert _sweep(["dimension=aggregation", "seeds=[0,5]", "launcher=debug", *sweep_env]) == 0
    m = _manifest(tmp_path, "aggregation-smoke")  # name = <dimension>-<budget>
    assert m["name"] == "aggregation-smoke" and m["dimension"] == "aggregation"
    assert m["grid"] == ["grpo", "grpo_st"]
    # 2 arms x 1 env x 2 seeds = 4 report cells, in grid order
    assert [(c["arm"], c["env"], c["seed"], c["role"], c["method"]) for c in m["cells"]] == [
        ("grpo", "sokoban", 0, "report", "grpo"), ("grpo", "sokoban", 5, "report", "grpo"),
        ("grpo_st", "sokoban", 0, "report", "grpo_st"), ("grpo_st", "sokoban", 5, "report", "grpo_st")]
    assert m["cells"][2]["overrides"] == {"po.method": "grpo_st"}
    assert _calls(tmp_path, "aggregation-smoke") == {c["cell_id"]: 1 for c in m["cells"]}
    cell = tmp_path / "sweeps" / "aggregation-smoke" / "cells" / m["cells"][0]["cell_id"]
    summary = json.loads((cell / "summary.json").read_text())
    assert summary["git_dirty"] in ("0", "1")  # provenance env passed from the driver
    # BC as its own stage, once per seed (the seed orders the SFT data: it is in the BC key)
    assert (tmp_path / "bc_calls.log").read_text() == "sokoban\nsokoban\n"


def test_bad_inputs_exit_2_and_launch_nothing(sweep_env, tmp_path, capsys):
    bad = [["dimension=nope"], ["dimension=is_clipping", "env=nowhere"], ["dimension=is_clipping", "not_a_key=1"],
           ["dimension=is_clipping", "seeds=0"], ["dimension=is_clipping", "launcher=moon"], ["env=sokoban"],
           ["dimension=is_clipping", "po.method=nope"]]
    for args in bad:
        assert _sweep([*args, "launcher=debug", *sweep_env] if "launcher=moon" not in args else [*args, *sweep_env]) == 2, args
    err = capsys.readouterr().err
    assert "valid: " in err and "is_clipping" in err and "sokoban" in err and "local" in err
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "bc_calls.log").exists()


def test_bad_grid_arm_exits_2(sweep_env, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("arms:\n  - {name: ok, po.method: grpo}\n  - {name: bad, po.method: not_a_method}\n")
    assert _sweep([f"grid={grid}", "launcher=debug", *sweep_env]) == 2
    assert not (tmp_path / "sweeps").exists()


def test_rerun_launches_only_missing_cells(sweep_env, tmp_path):
    args = ["dimension=advantage", "seeds=2", "launcher=debug", *sweep_env]
    assert _sweep(args) == 0
    m = _manifest(tmp_path, "advantage-smoke")
    cells = tmp_path / "sweeps" / "advantage-smoke" / "cells"
    lost = m["cells"][3]["cell_id"]
    (cells / lost / "summary.json").unlink()  # an unfinished cell
    assert _sweep(args) == 0
    # every cell ran once, except the one without a summary, which ran again
    assert _calls(tmp_path, "advantage-smoke") == {c["cell_id"]: 1 + (c["cell_id"] == lost) for c in m["cells"]}


def test_failed_cell_keeps_traceback_and_exits_1(sweep_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_FAIL_ARMS", "gigpo")
    args = ["dimension=advantage", "seeds=1", "launcher=debug", *sweep_env]
    assert _sweep(args) == 1
    m = _manifest(tmp_path, "advantage-smoke")
    failed = next(c["cell_id"] for c in m["cells"] if c["arm"] == "gigpo")
    err = (tmp_path / "sweeps" / "advantage-smoke" / "cells" / failed / "error.txt").read_text()
    assert "Traceback" in err and "fake failure in arm gigpo" in err
    assert status_main(["name=advantage-smoke", f"results_dir={tmp_path}"], log=print) == 0
    assert "3 cells: 2 done, 0 busy, 1 failed, 0 missing" in capsys.readouterr().out
    monkeypatch.setenv("FAKE_FAIL_ARMS", "")
    assert _sweep(args) == 0  # the rerun retries the failed cell only
    assert _calls(tmp_path, "advantage-smoke") == {c["cell_id"]: 1 + (c["cell_id"] == failed) for c in m["cells"]}


def test_fail_fast_stops_launching(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_ARMS", "grpo")
    assert _sweep(["dimension=advantage", "seeds=1", "launcher=debug", "fail_fast=true", *sweep_env]) == 1
    assert len(_calls(tmp_path, "advantage-smoke")) == 1  # grpo is first; nothing after it ran


def test_busy_cell_job_exits_as_busy(sweep_env, tmp_path):
    from arena.sweeps.job import run_cell
    from arena.sweeps.sweep import build_plan

    plan, _ = build_plan(["dimension=aggregation", "seeds=1", *sweep_env])
    cell = plan.cells[0]
    with CellLock(cell.out) as held:
        assert held
        assert run_cell(cell.cfg, env={}, train_fn=fake_train.train) == "busy"
        assert not (cell.out / "calls.log").exists()  # ran nothing
    assert run_cell(cell.cfg, env={}, train_fn=fake_train.train) == "done"


def test_status_unknown_sweep_exits_2(tmp_path):
    assert status_main(["name=nope", f"results_dir={tmp_path}"]) == 2
    assert status_main(["bogus=1"]) == 2


def test_one_budget_precedence_the_last_budget_wins_for_sweep_and_search_names():
    from arena.sweeps.sweep import budget_of

    # by hand: Hydra applies overrides in order, so the last budget= is the one composed
    assert budget_of(["seed=1", "budget=smoke", "lr=0.1", "budget=stress"]) == "stress"
    assert budget_of(["budget=smoke"]) == "smoke"
    assert budget_of(["lr=0.1"]) == "default"
