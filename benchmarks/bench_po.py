"""Benchmark: arena's clip losses vs verl 0.9.1's, loss + backward, token_mean aggregation.

For each method (ppo, gspo, cispo, sapo) both sides get the same tensors (default B=256, T=512,
float32, CPU) and run `loss -> backward` `--iters` times per repeat. Repeats are interleaved
(ours, verl, ours, verl, ...) so that machine load hits both alike. Prints the median seconds per
call of each side and the median of the per-repeat ratios ours/verl.

    .venv/bin/python benchmarks/bench_po.py            # full size
    .venv/bin/python benchmarks/bench_po.py --quick    # small smoke run
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Callable

import torch

from arena.po.aggregation import token_mean
from arena.po.clipping import CLIP

# our method -> (verl loss_mode, our hyperparameters, verl ActorConfig fields)
METHODS = {
    "ppo": ("vanilla", dict(eps_low=0.2, eps_high=0.28, clip_c=3.0), dict(clip_ratio_low=0.2, clip_ratio_high=0.28)),
    "gspo": ("gspo", dict(eps_low=3e-3, eps_high=4e-3), dict(clip_ratio_low=3e-3, clip_ratio_high=4e-3)),
    "cispo": ("cispo", dict(eps_low=1.0, eps_high=0.2), dict(clip_ratio_low=1.0, clip_ratio_high=0.2)),
    "sapo": ("sapo", dict(tau_pos=1.0, tau_neg=1.05), dict(tau_pos=1.0, tau_neg=1.05)),
}


def make_batch(batch: int, length: int, seed: int = 0):
    """Random right-padded batch: old/new log-probs, broadcast advantages, mask (float32)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)  # [B]
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()  # [B, T]
    old = -torch.rand(batch, length, generator=gen) * 3  # [B, T]
    logp = old + 0.1 * torch.randn(batch, length, generator=gen)  # [B, T]
    adv = torch.randn(batch, 1, generator=gen).expand(batch, length) * mask  # [B, T]
    return logp, old, adv.contiguous(), mask


def _ours(method: str) -> Callable:
    fn, hp = CLIP[method], METHODS[method][1]

    def step(logp, old, adv, mask):
        loss_tok, _ = fn(logp, old, adv, mask, **hp)  # [B, T]
        token_mean(loss_tok, mask).backward()

    return step


def _verl(method: str) -> Callable:
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import ActorConfig

    mode, _, fields = METHODS[method]
    config = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **fields)
    fn = get_policy_loss_fn(mode)

    def step(logp, old, adv, mask):
        loss, _ = fn(old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask.bool(),
                     loss_agg_mode="token-mean", config=config)
        loss.backward()

    return step


def _time(step: Callable, tensors, iters: int) -> float:
    """Seconds per call of step (fresh leaf each call, so every backward is complete)."""
    logp0, old, adv, mask = tensors
    leaves = [logp0.clone().requires_grad_() for _ in range(iters)]
    start = time.perf_counter()
    for logp in leaves:
        step(logp, old, adv, mask)
    return (time.perf_counter() - start) / iters


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the benchmark, print the table, return {method: median ratio ours/verl}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small B, T and few iterations (smoke test)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20, help="calls per repeat")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.length, args.repeats, args.iters = 8, 16, 3, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    tensors = make_batch(args.batch, args.length)
    ratios: dict[str, float] = {}
    print(f"B={args.batch} T={args.length} float32 CPU threads={torch.get_num_threads()} "
          f"repeats={args.repeats} iters={args.iters}; loss + backward, token_mean")
    print(f"{'method':<8}{'ours s':>12}{'verl s':>12}{'ours/verl':>11}")
    for method in METHODS:
        ours, verl = _ours(method), _verl(method)
        _time(ours, tensors, 2), _time(verl, tensors, 2)  # warm-up
        ours_s, verl_s = [], []
        for _ in range(args.repeats):
            ours_s.append(_time(ours, tensors, args.iters))
            verl_s.append(_time(verl, tensors, args.iters))
        ratios[method] = statistics.median(o / v for o, v in zip(ours_s, verl_s))
        print(f"{method:<8}{statistics.median(ours_s):>12.6f}{statistics.median(verl_s):>12.6f}{ratios[method]:>11.3f}")
    return ratios


if __name__ == "__main__":
    main()
