"""RL correctness: from a random initialisation, every clipping family and SAMPO
solve the one-turn sanity environment (arena/envs/sanity.py) within 20 steps.

A wrong gradient sign would drive success to 0 (the policy learns to avoid the rewarded
word); broken bookkeeping (advantages misaligned with rows, a wrong mask) leaves it near chance,
1/4. The bar: greedy eval success >= 95% on 64 held-out seeds at the end, from < 50% at step 0.
"""
import pytest

from arena.backends.embedded.run import run_training
from arena.runs.layout import run_dir
from arena.config import load_config
from arena.runs import RunFolder


@pytest.mark.parametrize("method", ["grpo", "gspo", "cispo", "sapo", "sampo"])
def test_each_method_solves_the_sanity_env_from_random_init(method, tmp_path_factory):
    results = tmp_path_factory.getbasetemp() / "sanity_results"  # one BC/tokenizer for all methods
    cfg = load_config(["env=sanity", "budget=sanity", f"po.method={method}", f"results_dir={results}", "wandb.enabled=false"])
    assert run_training(cfg, log=lambda *_: None) == 0
    run = RunFolder(run_dir(cfg))
    evals = [r["eval/success_rate"] for r in run.read_metrics() if "eval/success_rate" in r]
    assert evals[0] < 0.5, f"{method}: the random init already solves it ({evals[0]})"
    assert run.summary()["final_eval_success"] >= 0.95, f"{method}: eval curve {evals}"
    assert run.summary()["status"] == "done"
