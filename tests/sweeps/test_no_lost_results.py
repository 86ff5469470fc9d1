"""Adversarial: ways a sweep could lose, double or hide a result (docs/design.md, Run folder and
Manifest), each shown not to happen."""
import json
import shutil

import pytest

from arena.analysis.frames import runs_frame
from arena.sweeps import job
from arena.sweeps.ledger import DONE, FAILED, MISSING, cell_state
from arena.sweeps.status import status_lines
from arena.sweeps.sweep import build_plan

from . import fake_train
from arena.sweeps.cli import sweep_main

from .test_sweep import _calls, _manifest, _sweep


def _one_cell(sweep_env, *extra):
    plan, _ = build_plan(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env, *extra])
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    plan.write_manifest()
    return plan, plan.cells[0]


@pytest.mark.parametrize("field, value", [("final_eval_success", "0.9"), ("final_eval_success", 1.5),
                                          ("steps", 2.5), ("stable", "yes"), ("n_eval", -1), ("theta", "NaN")])
def test_valid_json_with_a_wrong_value_is_no_proof_and_the_cell_reruns(sweep_env, tmp_path, field, value):
    # A summary.json that parses and has every field, but a value build_summary never writes
    # (a string score, a score above 1, ...): it used to count as done and the report read it.
    plan, cell = _one_cell(sweep_env)
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    summary = json.loads((cell.out / "summary.json").read_text())
    (cell.out / "summary.json").write_text(json.dumps({**summary, field: value}))
    assert cell_state(cell.out) == MISSING
    line = next(li for li in status_lines(tmp_path, plan.name) if cell.cell_id in li)
    assert f"{field}={value!r}" in line and "valid:" in line
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE  # ran again, the bad one kept aside
    assert len((cell.out / "calls.log").read_text().split()) == 2
    assert len(list(cell.out.glob("summary.json.corrupt-*"))) == 1


def test_a_run_folder_copied_from_another_sweep_is_neither_trusted_nor_run_over(sweep_env, tmp_path):
    # Sweep "b"'s cell folder replaced by a finished cell of sweep "a" (another arm: another
    # cell id). Its summary names a's cell: b's ledger, status and report must not take it as
    # b's result, and b's rerun must not resume a's checkpoint in it (nor move a's files).
    a_plan, a_cell = _one_cell(sweep_env, "name=a", "po.hp.eps_high=0.3")
    b_plan, b_cell = _one_cell(sweep_env, "name=b")
    assert a_cell.cell_id != b_cell.cell_id
    assert job.run_cell(a_cell.cfg, env={}, train_fn=fake_train.train) == DONE
    shutil.copytree(a_cell.out, b_cell.out)
    copied = (b_cell.out / "summary.json").read_text()
    assert cell_state(b_cell.out) == MISSING  # not done
    line = next(li for li in status_lines(tmp_path, "b") if b_cell.cell_id in li)
    assert f"summary of cell {a_cell.cell_id}" in line and "move this folder away" in line
    assert job.run_cell(b_cell.cfg, env={}, train_fn=fake_train.train) == FAILED
    assert len((b_cell.out / "calls.log").read_text().split()) == 1  # a's one call: b trained nothing here
    assert (b_cell.out / "summary.json").read_text() == copied and not list(b_cell.out.glob("summary.json.corrupt-*"))
    assert f"summary of cell {a_cell.cell_id}" in (b_cell.out / "error.txt").read_text()
    assert cell_state(b_cell.out) == FAILED
    b_row = runs_frame(tmp_path, "b").set_index("run").loc[b_cell.cell_id]
    assert b_row["status"] == "failed" and b_row["final_eval_success"] != b_row["final_eval_success"]  # NaN: never scored
    assert runs_frame(tmp_path, "a").set_index("run").loc[a_cell.cell_id, "status"] == "done"  # a's own result stays


def test_fewer_seeds_or_another_grid_under_the_same_name_exits_2_and_hides_nothing(sweep_env, tmp_path, capsys):
    # A rerun that leaves finished cells out of the manifest (seeds=1 after seeds=2, or another
    # grid under the same name=) would drop them from the report: it is refused, nothing written.
    assert _sweep(["dimension=aggregation", "seeds=2", "launcher=debug", *sweep_env]) == 0
    before = _manifest(tmp_path, "aggregation-smoke")
    calls = _calls(tmp_path, "aggregation-smoke")
    assert _sweep(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]) == 2
    err = capsys.readouterr().err
    assert "2 finished run(s)" in err and "grpo/sokoban/1" in err and "grpo_st/sokoban/1" in err and "name=" in err
    assert _sweep(["dimension=advantage", "name=aggregation-smoke", "launcher=debug", *sweep_env]) == 2
    assert _manifest(tmp_path, "aggregation-smoke") == before and _calls(tmp_path, "aggregation-smoke") == calls
    # more seeds keep every finished one (and run only the new ones)
    assert _sweep(["dimension=aggregation", "seeds=3", "launcher=debug", *sweep_env]) == 0
    after = _calls(tmp_path, "aggregation-smoke")
    assert {k: v for k, v in after.items() if k in calls} == calls and len(after) == 6


def test_a_cell_killed_after_its_last_metrics_row_and_before_its_summary_is_rerun_once(sweep_env, tmp_path):
    # The kill point between metrics.jsonl and summary.json: no summary, so not done; the rerun
    # writes the summary and the step rows appear once each (reset_metrics, then the rows).
    plan, cell = _one_cell(sweep_env)
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    (cell.out / "summary.json").unlink()
    assert cell_state(cell.out) == MISSING
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    steps = [json.loads(line)["step"] for line in (cell.out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]


def _drop_cell_id(cell, config_of=None):
    """Make the cell's summary.json look like one written before summaries named their cell
    (no cell_id); config.yaml holds `config_of`'s resolved config (None: no config.yaml)."""
    from omegaconf import OmegaConf

    summary = json.loads((cell.out / "summary.json").read_text())
    del summary["cell_id"]
    (cell.out / "summary.json").write_text(json.dumps(summary))
    if config_of is not None:
        (cell.out / "config.yaml").write_text(OmegaConf.to_yaml(config_of.cfg))


def test_an_old_summary_without_cell_id_is_proof_only_when_its_config_hashes_to_the_cell(sweep_env, tmp_path):
    # An old summary (no cell_id) is checked against its folder's config.yaml: the cell id is
    # the hash of the resolved config, so the cell's own config.yaml confirms it...
    plan, cell = _one_cell(sweep_env, "name=own")
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    _drop_cell_id(cell, config_of=cell)
    assert cell_state(cell.out) == DONE
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    assert len((cell.out / "calls.log").read_text().split()) == 1  # trusted: not trained again
    # ... another cell's config.yaml (a folder copied in) names that cell: never scored, not run over
    a_plan, a_cell = _one_cell(sweep_env, "name=a", "po.hp.eps_high=0.3")
    b_plan, b_cell = _one_cell(sweep_env, "name=b")
    assert job.run_cell(a_cell.cfg, env={}, train_fn=fake_train.train) == DONE
    _drop_cell_id(a_cell, config_of=a_cell)
    shutil.copytree(a_cell.out, b_cell.out)
    assert cell_state(b_cell.out) == MISSING
    assert job.run_cell(b_cell.cfg, env={}, train_fn=fake_train.train) == FAILED
    assert f"summary of cell {a_cell.cell_id}" in (b_cell.out / "error.txt").read_text()


def test_an_old_summary_without_cell_id_or_config_is_no_proof_and_the_cell_reruns(sweep_env, tmp_path):
    plan, cell = _one_cell(sweep_env)
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    _drop_cell_id(cell, config_of=None)
    assert not (cell.out / "config.yaml").exists()
    assert cell_state(cell.out) == MISSING
    line = next(li for li in status_lines(tmp_path, plan.name) if cell.cell_id in li)
    assert "names no cell_id" in line
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    assert len((cell.out / "calls.log").read_text().split()) == 2  # trained again, the old summary set aside


def test_another_config_under_the_same_name_supersedes_finished_cells_loudly_and_keeps_them(sweep_env, tmp_path):
    # steps=4 after the smoke budget's 3: same arms/envs/seeds, new cell ids. The new cells replace
    # the old ones in the manifest (the report shows the config asked for), but never quietly:
    # the command names every superseded arm/env/seed and its folder, which stays done on disk.
    from arena.sweeps.sweep import build_plan

    args = ["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]
    assert _sweep(args) == 0
    old = {c["cell_id"] for c in _manifest(tmp_path, "aggregation-smoke")["cells"] if c["role"] == "report"}
    lines = []
    assert sweep_main([*args, "steps=4"], train_fn=fake_train.train, bc_fn=fake_train.bc, log=lines.append) == 0
    note = next(li for li in lines if "superseded" in li)
    assert "2 finished run(s)" in note and "name=" in note
    assert all(f"cells/{cid}" in note for cid in old)
    new = {c["cell_id"] for c in _manifest(tmp_path, "aggregation-smoke")["cells"] if c["role"] == "report"}
    assert new.isdisjoint(old) and len(new) == 2
    assert all(cell_state(tmp_path / "sweeps" / "aggregation-smoke" / "cells" / cid) == DONE for cid in old | new)
    # the same command again: nothing of another config is finished in the manifest now, no note
    plan, _ = build_plan([*args, "steps=4"])
    assert plan.superseded == []
