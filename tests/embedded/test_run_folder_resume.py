"""Run folder, checkpoint/resume and W&B for the embedded trainer.

The resume test kills a run after its step-2 checkpoint (an exception inside step 3's update)
and reruns the same command. Per-step seeds and sampler seeds are functions of (seed, step),
and the checkpoint restores model, optimizer and RNG, so the resumed run must reproduce the
uninterrupted run's rows exactly, with every step once."""
import json
import re

import pytest

import arena.backends.embedded.trainer as trainer_mod
from arena.backends.embedded.run import run_training
from arena.runs.layout import run_dir
from arena.config import cell_id, load_config
from arena.runs import RunFolder
from arena.runs.summary import paired_gain_se
from arena.runs.wandb_log import wandb_init_kwargs, wandb_run_id

ARGS = ["env=sanity", "budget=sanity", "steps=4", "save_freq=2", "test_freq=2", "eval.n=16", "wandb.enabled=false"]


def _rows(run):
    # everything but timings, which differ between runs
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in run.read_metrics()]


def test_killed_run_resumes_from_its_checkpoint_and_matches_the_uninterrupted_run(tmp_path, monkeypatch):
    ref_cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / 'ref'}"])
    assert run_training(ref_cfg, log=lambda *_: None) == 0
    cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / 'killed'}"])
    real_update, calls = trainer_mod.ppo_update, {"n": 0}

    def dying_update(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:  # step 3, after the step-2 checkpoint
            raise RuntimeError("simulated kill")
        return real_update(*a, **k)

    monkeypatch.setattr(trainer_mod, "ppo_update", dying_update)
    assert run_training(cfg, log=lambda *_: None) == 1
    run = RunFolder(tmp_path / "killed")
    assert "simulated kill" in run.error_file.read_text() and not run.done
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2]
    monkeypatch.setattr(trainer_mod, "ppo_update", real_update)
    logs = []
    assert run_training(cfg, log=logs.append) == 0
    assert any("resumed from step 2" in line for line in logs)
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2, 3, 4]
    assert _rows(run) == _rows(RunFolder(tmp_path / "ref"))
    assert run.done and not run.error_file.exists()


def test_run_folder_contract(tmp_path):
    cfg = load_config(ARGS + [f"results_dir={tmp_path}", "name=swp", "arm=grpo"])
    assert run_training(cfg, log=lambda *_: None) == 0
    run = RunFolder(run_dir(cfg))
    assert run.path == tmp_path / "runs" / cell_id(cfg)
    assert "arm: grpo" in run.config_file.read_text()
    summary = run.summary()
    for key in ("status", "final_eval_success", "var_last20", "noise_floor", "theta", "stable", "n_eval",
                "steps", "wall_seconds", "git_sha", "git_dirty", "versions", "host", "slurm_job_id"):
        assert key in summary, key
    step_keys = set().union(*(r.keys() for r in run.read_metrics() if r["step"] > 0))
    for key in ("train/success_rate", "actor/off_policy_kl", "actor/grad_norm", "actor/entropy", "actor/clipfrac_high",
                "actor/clipfrac_low", "actor/clipfrac_pos_adv", "actor/clipfrac_neg_adv", "actor/masked_seqs",
                "actor/updates_per_step", "rollout/format_valid_ratio", "rollout/action_valid_ratio",
                "rollout/response_length", "filter/kept_group_frac", "perf/step_seconds"):
        assert all(key in r for r in run.read_metrics() if r["step"] > 0), key
    # kl_coef=0 in the sanity budget: no reference model, so no kl_ref; with KL on it is logged
    assert "actor/kl_ref" not in step_keys
    # each eval (steps 0, 2, 4: test_freq 2, the final window 3.2-4 holds step 4) records which of
    # its 16 episodes it won; their mean is the eval's success, and the summary's paired SE is
    # paired_gain_se of the first and the last eval's wins
    evals = {r["step"]: r["eval/success_rate"] for r in run.read_metrics() if "eval/success_rate" in r}
    assert sorted(evals) == [0, 2, 4]
    for step, success in evals.items():
        wins = run.read_eval_wins(step)
        assert len(wins) == 16 and set(wins) <= {0, 1} and sum(wins) / 16 == success
    assert summary["gain_paired_se"] == paired_gain_se(run.read_eval_wins(0), run.read_eval_wins(4))
    # a finished cell is not trained again
    logs = []
    assert run_training(cfg, log=logs.append) == 0 and "already done" in logs[0]


def test_wandb_init_arguments_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = load_config(["po.method=sapo_sm", "name=is_clipping-default", "arm=sapo_sm", "seed=2"])
    kw = wandb_init_kwargs(cfg, cell_id(cfg), tmp_path)
    assert kw["mode"] == "offline"  # offline is the default
    assert kw["group"] == "is_clipping-default/sapo_sm/sokoban" and kw["id"].startswith(cell_id(cfg) + "-")
    assert kw["resume"] == "allow" and kw["job_type"] == "train"
    assert {"env:sokoban", "arm:sapo_sm", "budget:default", "backend:embedded"} <= set(kw["tags"])
    conf = kw["config"]
    assert conf["po.clipping"] == "sapo" and conf["po.seq_mask_delta"] == 3e-3 and conf["po.hp.tau_pos"] == 1.0
    assert conf["seed"] == 2 and conf["env.kwargs.dim"] == 7 and "po" not in conf
    json.dumps(conf)  # flat and serialisable
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_init_kwargs(cfg, "x", tmp_path)["mode"] == "disabled"  # WANDB_MODE is honoured


def test_wandb_run_id_is_random_made_once_and_kept_in_the_run_folder(tmp_path):
    """The same sweep name and cell in two results dirs (two people reproducing the main job)
    get two ids; one folder keeps its id across restarts (a resume continues its run)."""
    ids, again = [], []
    for results in ("a", "b"):
        cfg = load_config(["po.method=grpo", "name=main", "arm=grpo", f"results_dir={tmp_path / results}"])
        cell = cell_id(cfg)
        folder = tmp_path / results / "sweeps" / "main" / "cells" / cell
        ids.append(wandb_init_kwargs(cfg, cell, folder)["id"])
        again.append(wandb_init_kwargs(cfg, cell, folder)["id"])
    assert ids[0] != ids[1] and again == ids
    assert ids[1] == (folder / "wandb_id.txt").read_text().strip()
    assert all(re.fullmatch(re.escape(cell) + "-[0-9a-f]{12}", i) for i in ids)
    (folder / "wandb_id.txt").write_text("someone-elses-id\n")  # not this cell's: replaced
    assert wandb_run_id(cell, folder) not in ("someone-elses-id", ids[1])


def test_wandb_offline_run_resumes_the_same_id(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    ids = []
    for step in (1, 2):  # each start rebuilds the config from the same command, as a resume does
        cfg = load_config(["po.method=grpo", "name=t", "arm=grpo"])
        run = wandb.init(**wandb_init_kwargs(cfg, "arena-test-id", tmp_path))
        ids.append(run.id)
        run.log({"eval/success_rate": 0.5}, step=step)
        run.finish()
    assert ids[0] == ids[1] and ids[0].startswith("arena-test-id-")
    assert len(list((tmp_path / "wandb").glob(f"offline-run-*{ids[0]}"))) >= 1
