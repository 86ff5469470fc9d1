"""The embedded backend on CUDA (marker `gpu`; CI has no GPU and skips these; the device machine
runs them through benchmarks/gpu_smoke.sh).

Same bar as test_rl_sanity.py, on the GPU: from a random initialisation GRPO solves the one-turn
sanity environment (greedy eval >= 95% on 64 held-out seeds, from < 50% at step 0). A wrong
device placement either raises (tensors on two devices) or, if something silently ran on the
CPU copy, leaves the CUDA model untrained and the bar unmet.
"""
import pytest
import torch

from arena.backends.embedded.run import run_training
from arena.runs.layout import run_dir
from arena.config import load_config
from arena.runs import RunFolder

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_grpo_solves_the_sanity_env_on_cuda(tmp_path):
    cfg = load_config(["env=sanity", "budget=sanity", "po.method=grpo", "device=cuda",
                       f"results_dir={tmp_path}", "wandb.enabled=false"])
    assert run_training(cfg, log=lambda *_: None) == 0
    run = RunFolder(run_dir(cfg))
    evals = [r["eval/success_rate"] for r in run.read_metrics() if "eval/success_rate" in r]
    assert evals[0] < 0.5, f"the random init already solves it ({evals[0]})"
    assert run.summary()["final_eval_success"] >= 0.95, f"eval curve {evals}"


def test_medium_model_multi_turn_sokoban_trains_on_cuda(tmp_path):
    # every path of the multi-turn loop (BC stage, rollout, log-probs, update, eval, checkpoint)
    # on the GPU with the 5M model; smoke budget, so only finiteness and completion are checked
    cfg = load_config(["env=sokoban", "budget=smoke", "model.size=medium", "device=cuda",
                       f"results_dir={tmp_path}", "wandb.enabled=false"])
    assert run_training(cfg, log=lambda *_: None) == 0
    rows = RunFolder(run_dir(cfg)).read_metrics()
    losses = [r["actor/pg_loss"] for r in rows if "actor/pg_loss" in r]
    assert len(losses) == cfg.steps and all(torch.isfinite(torch.tensor(losses)))
