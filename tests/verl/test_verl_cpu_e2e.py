"""`arena train backend=verl env=sokoban budget=smoke` end to end on the CPU (slow).

The whole verl loop in real Ray processes: a private Ray head with one "GPU" slot, verl's FSDP2
actor and reference over gloo on the CPU platform, the "arena" rollout server with weight sync,
the per-turn fan-out, old log-probs, arena's advantages and loss, the update, verl checkpoints
and the run folder. It starts from the session's shared BC checkpoint (conftest.py: sampled
replies have the format), so the rewards differ inside groups and the advantages, the policy
loss and the gradient are not zero: the loop's numbers are exercised with a gradient.

Wall time: 146 s on the shared 2-core box at load ~7 (Ray start and worker groups ~60 s, 3 PPO steps of
2 groups x 4 episodes, 4 evals of 8 episodes); stopped after 12 min (SIGINT first, so the run
stops its Ray head)."""
from __future__ import annotations

import json
import os

import pytest

from .verl_runs import failure_text, metrics_rows, run_arena

pytest.importorskip("verl")
pytest.importorskip("ray")

TIMEOUT_S = 720
# keys every training row carries on both backends (docs/design.md, Metrics glossary)
STEP_KEYS = ("train/success_rate", "rollout/format_valid_ratio", "rollout/action_valid_ratio",
             "rollout/response_length", "rollout/turn_samples", "filter/kept_group_frac", "filter/tries",
             "actor/pg_loss", "actor/off_policy_kl", "actor/kl_ref", "actor/entropy", "actor/grad_norm",
             "actor/updates_per_step", "perf/step_seconds",
             # what the report's mechanisms table reads (docs/design.md, Report: mechanisms)
             "rollout/response_length_std", "adv/anchor_repeat_frac", "adv/step_term_nonzero_frac")


@pytest.mark.slow
def test_verl_smoke_run_on_cpu_writes_the_run_folder(tmp_path, verl_bc_checkpoint):
    out, results = tmp_path / "run", tmp_path / "results"
    code, log = run_arena(["train", "backend=verl", "env=sokoban", "budget=smoke", f"out={out}",
                           f"results_dir={results}", f"model.path={verl_bc_checkpoint}", "wandb.enabled=false"],
                          timeout=TIMEOUT_S)
    assert code == 0, failure_text(out, log)
    config = (out / "config.yaml").read_text()
    assert "backend: verl" in config and "tool_sandbox: null" in config  # as the embedded run records it
    rows = metrics_rows(out)
    # one row per step, in order: step 0 is the eval before any update, then 3 PPO steps
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert "eval/success_rate" in rows[0] and "actor/pg_loss" not in rows[0]
    for row in rows[1:]:
        missing = [k for k in STEP_KEYS if k not in row]
        assert not missing, (row["step"], missing)
        assert row["rollout/turn_samples"] > 0 and row["actor/grad_norm"] >= 0
        assert "eval/success_rate" in row  # test_freq = 1
        # smoke: ppo_num_mini_batches = 2 -> two optimizer steps per RL step, as on the embedded backend
        assert row["actor/updates_per_step"] == 2.0
    # the BC policy keeps the format while sampling (it ends near 0 only if the loop breaks it)
    first = rows[1]
    assert first["rollout/format_valid_ratio"] > 0.8, first["rollout/format_valid_ratio"]
    # rewards differ inside a group: GRPO advantages of both signs, a nonzero PG loss and gradient
    trained = [r for r in rows[1:] if r["critic/advantages/max"] > 0 > r["critic/advantages/min"]]
    assert trained, [(r["critic/advantages/min"], r["critic/advantages/max"]) for r in rows[1:]]
    assert any(abs(r["actor/pg_loss"]) > 1e-6 and r["actor/grad_norm"] > 1e-6 for r in trained)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "verl" and summary["steps"] == 3
    assert summary["status"] in ("done", "collapsed")  # smoke: no learning expected, but the format holds
    # verl's own checkpoint layout, one per step (save_freq = 1)
    assert (out / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert all((out / "ckpt" / f"global_step_{k}" / "actor").is_dir() for k in (1, 2, 3))
    # the policy as HF folders (docs/design.md, Run folder): every saved step and the final one,
    # verl's own hf_model save linked into the run folder, float32 as trained
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arena.runs.policy import policy_folder, saved_steps

    assert saved_steps(out) == [1, 2, 3] and policy_folder(out) == out / "policy"
    policy = AutoModelForCausalLM.from_pretrained(out / "policy")
    assert policy.dtype == torch.float32 and AutoTokenizer.from_pretrained(out / "policy").pad_token == "<pad>"
    assert os.path.samefile(out / "policy" / "model.safetensors",
                            out / "ckpt" / "global_step_3" / "actor" / "huggingface" / "model.safetensors")
