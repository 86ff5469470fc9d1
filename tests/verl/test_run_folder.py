"""The verl run-folder writer, fed a recorded verl metrics dict, produces our §F keys."""
import json

import numpy as np
import torch

from arena.backends.verl.run_folder import VerlRunWriter, to_arena_metrics
from arena.runs.folder import RunFolder

# one step of RayPPOTrainer.fit's metrics, with verl 0.9.1 key names (values by hand)
RECORDED = {
    "training/global_step": 3,
    "actor/pg_loss": 0.0123,
    "actor/ppo_kl": np.float32(0.002),
    "actor/pg_clipfrac": 0.05,
    "actor/pg_clipfrac_lower": 0.0,
    "actor/kl_loss": torch.tensor(0.004),
    "actor/entropy": 1.25,
    "actor/grad_norm": [0.5, 0.7],  # per-mini-batch list -> mean 0.6
    "actor/clipfrac_high": 0.03, "actor/clipfrac_low": 0.01,
    "actor/clipfrac_pos_adv": 0.04, "actor/clipfrac_neg_adv": 0.02, "actor/masked_seqs": 1.0,
    "critic/score/mean": 0.4,
    "response_length/mean": 17.5,
    "timing_s/step": 12.5,
    "timing_s/gen": 8.0,
    "val-core/sokoban/reward/mean@1": 0.375,
    "rollout/format_valid_ratio": 0.9, "rollout/action_valid_ratio": 0.8,
    "train/success_rate": 0.25, "filter/kept_group_frac": 0.5,
    "some/array": np.zeros(3),  # not a scalar: dropped
}
OUR_KEYS = ["train/success_rate", "eval/success_rate", "actor/off_policy_kl", "actor/kl_ref", "actor/grad_norm",
            "actor/entropy", "actor/clipfrac_high", "actor/clipfrac_low", "actor/clipfrac_pos_adv",
            "actor/clipfrac_neg_adv", "actor/masked_seqs", "actor/updates_per_step", "rollout/format_valid_ratio",
            "rollout/action_valid_ratio", "rollout/response_length", "filter/kept_group_frac", "perf/step_seconds"]


def test_mapping_produces_every_key():
    row = to_arena_metrics(RECORDED, updates_per_step=2)
    assert sorted(OUR_KEYS) == sorted(k for k in OUR_KEYS if k in row)
    assert abs(row["actor/off_policy_kl"] - 0.002) < 1e-9
    assert abs(row["actor/kl_ref"] - 0.004) < 1e-9
    assert row["actor/grad_norm"] == 0.6  # (0.5 + 0.7) / 2
    assert row["eval/success_rate"] == 0.375 and row["perf/step_seconds"] == 12.5
    assert row["rollout/response_length"] == 17.5 and row["actor/updates_per_step"] == 2
    assert row["actor/pg_loss"] == 0.0123  # verl's keys stay
    assert "some/array" not in row


def test_our_key_wins_over_mapped_one():
    row = to_arena_metrics({"actor/ppo_kl": 0.5, "actor/off_policy_kl": 0.1})
    assert row["actor/off_policy_kl"] == 0.1


def test_writer_folder_resume_and_summary(tmp_path):
    folder = RunFolder(tmp_path / "cell")
    w = VerlRunWriter(folder, total_steps=4, theta=0.0025, min_points=1, n_eval=8, updates_per_step=2, cell_id="abc")
    w.start("seed: 0\n")
    for step in range(0, 4):
        w.log(RECORDED, step)
    assert not folder.summary_file.exists()
    # resume from the step-1 checkpoint: rows 2, 3 are dropped, not the whole file
    w2 = VerlRunWriter(folder, total_steps=4, theta=0.0025, min_points=1, n_eval=8, updates_per_step=2)
    w2.start("seed: 0\n", resume_step=1)
    assert [r["step"] for r in folder.read_metrics()] == [0, 1]
    for step in range(2, 5):
        w2.log(RECORDED, step)
    summary = w2.finish()
    rows = [json.loads(line) for line in folder.metrics_file.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert all(k in rows[-1] for k in OUR_KEYS)
    # window = eval points with step >= 0.8*4 = 3.2 -> step 4 only, success 0.375: var 0, stable
    assert summary["status"] == "done" and summary["final_eval_success"] == 0.375
    assert summary["var_last20"] == 0.0 and summary["stable"] is True and summary["steps"] == 4
    assert json.loads(folder.summary_file.read_text())["backend"] == "verl"
    assert folder.config_file.read_text() == "seed: 0\n"
