"""Smaller holes closed (docs/design.md, Run folder and CLI grammar; docs/eval.md): non-finite
numbers in a config, symlinks planted in a run folder, a results_dir that cannot be written,
a summary.json that disagrees with its metrics.jsonl, and a long household pool generation
started by surprise."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arena.cli import main

PRECIOUS = "{\"step\": 0}\n"  # a file outside the run (it reads as a metrics row, so only a write can hurt it)


@pytest.mark.parametrize("arg", ["lr=inf", "bc.lr=nan", "eval.temperature=nan", "kl_coef=inf",
                                 "stability.theta=-inf", "po.hp.eps_high=nan"])
def test_a_non_finite_number_is_bad_input(capsys, tmp_path, arg):
    # a tiny run, so that a regression shows as a fast failure, not a long training run
    assert main(["train", arg, "env=sanity", "budget=smoke", "steps=1", f"results_dir={tmp_path}", "wandb.enabled=false"]) == 2
    err = capsys.readouterr().err
    assert arg.split("=")[0] in err and "valid:" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_nothing_is_written_through_a_symlink_planted_in_a_run_folder(tmp_path):
    from arena.runs import RunFolder
    from arena.io.atomic import SymlinkRefused, atomic_write_text

    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = RunFolder(tmp_path / "run").create()
    for name in ("metrics.jsonl", "error.txt"):
        os.symlink(victim, run.path / name)
    with pytest.raises(SymlinkRefused, match="symlink"):  # an append would write into the target
        run.append_metrics({"step": 1, "x": 1.0})
    run.write_error("boom\n")  # an atomic write replaces the link itself
    assert not (run.path / "error.txt").is_symlink() and (run.path / "error.txt").read_text() == "boom\n"
    os.rmdir(run.ckpt)
    os.symlink(elsewhere, run.ckpt)  # a folder inside the run that points elsewhere
    with pytest.raises(SymlinkRefused, match="symlink"):
        atomic_write_text(run.ckpt / "state.json", "{}")
    assert victim.read_text() == PRECIOUS and not list(elsewhere.iterdir())


def test_a_results_dir_that_cannot_be_written_is_exit_2_not_a_traceback(tmp_path, capsys):
    if os.geteuid() == 0:  # root writes through file modes; /sys refuses even root
        results = Path("/sys/arena-readonly-results")
    else:
        results = tmp_path / "ro"
        results.mkdir(mode=0o555)
    args = ["train", "env=sanity", "budget=smoke", "steps=1", "wandb.enabled=false", f"results_dir={results}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot write {results}" in err and "valid:" in err and "Traceback" not in err


def test_arena_status_flags_a_summary_that_disagrees_with_metrics(tmp_path):
    from arena.runs import RunFolder
    from arena.sweeps.status import status_lines
    from arena.sweeps.sweep import build_plan

    plan, _ = build_plan(["dimension=aggregation", "seeds=1", "launcher=debug", f"results_dir={tmp_path}",
                          "budget=smoke", "wandb.enabled=false"])
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    plan.write_manifest()
    cell = plan.cells[0]
    run = RunFolder(cell.out).create()
    for step, success in ((0, 0.25), (5, 0.5)):
        run.append_metrics({"step": step, "eval/success_rate": success})
    summary = {"status": "done", "cell_id": cell.cell_id, "final_eval_success": 0.5, "initial_eval_success": 0.25,
               "var_last20": 0.0, "noise_floor": 0.0, "theta": 0.0025, "stable": True, "n_eval": 8, "steps": 5,
               "wall_seconds": 1.0, "git_sha": None, "git_dirty": None, "versions": {}, "host": "h",
               "slurm_job_id": None}
    run.write_summary(summary)
    line = next(li for li in status_lines(tmp_path, plan.name) if cell.cell_id in li)
    assert "WARNING" not in line  # agrees
    run.summary_file.write_text(json.dumps({**summary, "final_eval_success": 0.9}))  # hand-edited
    line = next(li for li in status_lines(tmp_path, plan.name) if cell.cell_id in li)
    assert "WARNING: summary.json says final_eval_success=0.9, metrics.jsonl gives 0.5" in line


def test_a_household_pool_generation_is_announced_and_needs_a_flag_unattended(tmp_path, capsys):
    cache = tmp_path / "cache"
    eval_args = ["eval", "env=household", "policy=openai", "model=m", "base_url=http://127.0.0.1:9/v1",
                 "api_key_env=", f"results_dir={tmp_path}", "n=1", f"env.kwargs.cache_dir={cache}"]
    for args in (eval_args, ["envs", "check", "env=household", "n=1", f"cache_dir={cache}"]):
        assert main(args) == 2  # pytest's stdin is not a terminal
        err = capsys.readouterr().err
        assert "not in the cache; its first use generates up to" in err and "make_pool=true" in err
        assert not cache.exists()  # nothing generated
