"""Eval speed: the current greedy eval (arena/lm/evaluate.py) against the code before the speed work
(benchmarks/reference_sampler.py), in the same process, on the same model and held-out seeds.

For each environment it builds the budget's model from its config (a fresh model, a tokenizer
built from expert demos, then a short BC so that some episodes are won; nothing is downloaded),
runs both evals in turn `--repeats` times (interleaved, so background load hits both alike) and
prints the median seconds of each, the ratio new/reference, and the equality check:
`wins identical` (every episode's outcome) and `greedy tokens identical` (every turn's
response ids, in the order the rollout asked for them).

    python benchmarks/bench_eval.py --quick              # 64 episodes per env, ~1-2 min
    python benchmarks/bench_eval.py --threads 2          # eval.n of the budget (256), 3 repeats
    python benchmarks/bench_eval.py --envs sokoban shop

Household at budget=default plays the large pool, generated once into the cache on its first
use (~20 min of one core); `--household-pool committed` plays the pool in the repository.
`eval_split(env, budget, threads)` is the function another benchmark imports.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from arena.malloc_tuning import tune_malloc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_sampler  # noqa: E402  (benchmarks/ is not a package)
from kernel_floor import kernel_seconds  # noqa: E402

ENVS = ("sokoban", "household", "shop")
BC_STEPS = 150  # a short BC: enough for some wins, so that "wins identical" can fail
DEMO_EPISODES = 64


def build_policy_model(env: str, budget: str, overrides=()):
    """(cfg, model, tokenizer): the budget's model shape and tokenizer, BC'd for BC_STEPS."""
    from arena.bc.train import collect_demos, fresh_model, sft
    from arena.config import load_config

    cfg = load_config([f"env={env}", f"budget={budget}", *overrides])
    pairs, _ = collect_demos(cfg, DEMO_EPISODES)
    model, tokenizer = fresh_model(cfg, pairs)
    sft(model, tokenizer, pairs, steps=BC_STEPS, lr=3e-3, batch_size=32, seed=0, log=lambda *a: None)
    return cfg, model.eval(), tokenizer


def recording(make_policy, record: list):
    """make_policy whose policies append every turn's response ids to `record`."""
    def make(*args, **kwargs):
        policy = make_policy(*args, **kwargs)

        def generate(prompts):
            outputs = policy(prompts)
            record.append([list(out[2]) for out in outputs])
            return outputs
        return generate
    return make


def timed_eval(evaluate_module, make_policy, model, tokenizer, cfg, n: int) -> tuple[float, dict, list]:
    """(seconds, evaluate's result, every turn's response ids) for one eval of n episodes."""
    record: list = []
    saved = evaluate_module.make_policy
    evaluate_module.make_policy = recording(make_policy, record)
    try:
        start = time.perf_counter()
        result = evaluate_module.evaluate(model, tokenizer, cfg, n=n)
        seconds = time.perf_counter() - start
    finally:
        evaluate_module.make_policy = saved
    return seconds, result, record


def eval_split(env: str, budget: str = "default", threads: int = 1, *, n: int | None = None, repeats: int = 3,
               overrides=()) -> dict:
    """Seconds of one eval, new and reference (medians over `repeats`), their ratio and the
    equality check, for `env` at `budget` on `threads` torch threads."""
    import arena.lm.evaluate as current
    from arena.config import to_plain
    from arena.lm.sampler import make_policy

    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg, model, tokenizer = build_policy_model(env, budget, overrides)
        n = cfg.eval.n if n is None else n
        # both paths play the same env objects, built before any timing
        reference_sampler._ENV_CACHE = current._ENV_CACHE
        current._eval_envs(cfg.env.name, to_plain(cfg.env.kwargs), n)
        times = {"reference": [], "new": []}
        runs = {}
        for _ in range(repeats):
            for name, module, factory in (("reference", reference_sampler, reference_sampler.make_policy),
                                          ("new", current, make_policy)):
                seconds, result, record = timed_eval(module, factory, model, tokenizer, cfg, n)
                times[name].append(seconds)
                runs.setdefault(name, (result, record))
        kernels = kernel_seconds(lambda: current.evaluate(model, tokenizer, cfg, n=n), threads)  # the new path
    finally:
        torch.set_num_threads(saved_threads)
    (ref_result, ref_tokens), (new_result, new_tokens) = runs["reference"], runs["new"]
    reference_s, new_s = statistics.median(times["reference"]), statistics.median(times["new"])
    return {
        "env": env, "budget": budget, "threads": threads, "n": n, "repeats": repeats,
        "reference_s": reference_s, "new_s": new_s, "ratio": new_s / reference_s,
        "success_rate": new_result["success_rate"],
        "wins_identical": ref_result["wins"] == new_result["wins"],
        "tokens_identical": ref_tokens == new_tokens,
        "turns": sum(len(turn) for turn in new_tokens),
        "kernel_s": kernels, "kernel_floor": kernels / reference_s,  # the lowest reachable ratio
    }


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="64 episodes per env, one repeat")
    ap.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    ap.add_argument("--budget", default="default")
    ap.add_argument("--threads", type=int, default=1, choices=(1, 2))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--household-pool", default=None, choices=("committed", "large"),
                    help="household's pool (default: the budget's)")
    args = ap.parse_args(argv)
    print(f"glibc malloc tuned as in every arena process: {'yes' if tune_malloc() else 'no'}")  # arena/malloc_tuning.py
    n, repeats = (64, 1) if args.quick else (None, args.repeats)
    results = []
    for env in args.envs:
        overrides = [f"env.kwargs.pool={args.household_pool}"] if env == "household" and args.household_pool else []
        print(f"[{env}] building the model (BC {BC_STEPS} steps) and timing {repeats} x 2 evals ...", flush=True)
        r = eval_split(env, args.budget, args.threads, n=n, repeats=repeats, overrides=overrides)
        results.append(r)
        print(f"{env:9s} budget={r['budget']} threads={r['threads']} n={r['n']}: reference {r['reference_s']:.2f} s, "
              f"new {r['new_s']:.2f} s, ratio new/reference {r['ratio']:.2f}x (target <= 0.5x); "
              f"success {r['success_rate']:.3f}; wins identical: {'yes' if r['wins_identical'] else 'NO'}; "
              f"greedy tokens identical: {'yes' if r['tokens_identical'] else 'NO'} ({r['turns']} turn rows); "
              f"in matmul and attention kernels {r['kernel_s']:.2f} s, so the ratio can go no lower than "
              f"{r['kernel_floor']:.2f}x without cutting their work", flush=True)
    return results


if __name__ == "__main__":
    main()
