"""RL update time: micro-batches sorted by length and trimmed to their own padding
(`sort_micro_batches=true`) against the default contiguous, full-width micro-batches.

One RL step's work after the rollout, as the trainer does it: old, reference and entropy
log-probs (`fill_logprobs`), advantages and `ppo_update`. The batches are real rollouts of the
environment's BC policy at `budget=learn` (the cached BC checkpoint; trained once if missing,
household needs its large pool in the cache), one per step seed. Each repeat runs every batch
in every mode from the same model and optimizer state, modes interleaved so that background
load hits them alike; the medians are compared.

    python benchmarks/bench_rl_micro_batches.py --env household   # ~2 min on one thread
    python benchmarks/bench_rl_micro_batches.py --env shop --quick results_dir=/tmp/r

Prints the rows and padded widths of the batches, one line per repeat and a final
`ratio sorted/default` line per micro-batch size (lower is faster).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from arena.agent.rollout import rollout
from arena.bc.train import load_initial_model
from arena.lm.micro_batches import row_lengths
from arena.lm.sampler import make_policy
from arena.backends.embedded.trainer import _to_device, fill_logprobs
from arena.backends.embedded.update import ppo_update
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.config import load_config, resolve_po
from arena.envs import make
from arena.envs.base import step_seeds
from arena.po.compose import compute_advantages


def collect_batches(cfg, model, tokenizer, n_batches: int) -> list:
    envs = [make(cfg.env.name, **dict(cfg.env.kwargs)) for _ in range(cfg.batch_envs * cfg.group_size)]
    policy = make_policy(model, tokenizer, temperature=cfg.temperature, top_p=cfg.top_p,
                         max_new_tokens=cfg.env.max_new_tokens, seed=0)
    batches = []
    for step in range(1, n_batches + 1):
        batch, _ = rollout(envs, step_seeds(cfg.seed, step, 0, cfg.batch_envs), cfg.group_size, policy,
                           penalty_coef=cfg.env.penalty_coef, history_length=cfg.env.history_length,
                           pad_id=tokenizer.pad_token_id, template=cfg.model.prompt_template)
        batches.append(_to_device(batch, torch.device("cpu")))
    return batches


def one_update(cfg, po, model, ref, batch, micro: int, sort: bool) -> float:
    """Seconds of fill_logprobs + advantages + ppo_update on a copy of `model` (state untouched)."""
    model = copy.deepcopy(model)
    batch = copy.copy(batch)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    t0 = time.perf_counter()
    fill_logprobs(model, ref, batch, micro, sort)
    adv = compute_advantages(po, batch)  # [N]
    ppo_update(model, opt, po, batch, adv, token_logprobs_and_entropy, num_mini_batches=cfg.ppo_num_mini_batches,
               mini_batch_size=cfg.ppo_mini_batch_size, ppo_epochs=cfg.ppo_epochs, micro_batch_size=micro,
               sort_micro_batches=sort, kl_coef=cfg.kl_coef, grad_clip=cfg.grad_clip)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="household")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--micro", type=int, nargs="+", default=[256, 64, 32], help="micro-batch sizes of the sorted mode")
    ap.add_argument("--quick", action="store_true", help="2 batches, 2 repeats")
    ap.add_argument("overrides", nargs="*", help="more config overrides, e.g. results_dir=/tmp/r (where the BC cache is)")
    args = ap.parse_args()
    n_batches, repeats = (2, 2) if args.quick else (args.batches, args.repeats)
    torch.set_num_threads(1)
    cfg = load_config([f"env={args.env}", "budget=learn", "seed=0", *args.overrides])
    po = resolve_po(cfg)
    model, tokenizer = load_initial_model(cfg)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    batches = collect_batches(cfg, model, tokenizer, n_batches)
    lengths = torch.cat([row_lengths(b.prompt_mask, b.response_mask) for b in batches]).float()  # [sum N]
    widths = [b.prompt_ids.shape[1] + b.response_ids.shape[1] for b in batches]
    print(f"{args.env}: {n_batches} batches of {statistics.mean(len(b) for b in batches):.0f} rows on average; "
          f"row length mean {float(lengths.mean()):.0f} tokens, padded width {statistics.mean(widths):.0f}")
    modes = [("default", cfg.micro_batch_size, False)] + [(f"sorted/{m}", m, True) for m in args.micro]
    for _, micro, sort in modes:  # warm-up
        one_update(cfg, po, model, ref, batches[0], micro, sort)
    times: dict[str, list[float]] = {name: [] for name, _, _ in modes}
    for r in range(repeats):
        for name, micro, sort in modes:
            times[name].append(sum(one_update(cfg, po, model, ref, b, micro, sort) for b in batches) / n_batches)
        print(f"repeat {r}: " + ", ".join(f"{name} {times[name][-1]:.3f} s" for name, _, _ in modes))
    base = statistics.median(times["default"])
    for name, _, _ in modes[1:]:
        print(f"ratio sorted/default micro={name.split('/')[1]} {statistics.median(times[name]) / base:.2f} (median s/step)")


if __name__ == "__main__":
    main()
