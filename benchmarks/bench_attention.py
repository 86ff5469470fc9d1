"""BC's SFT step under the embedded model's attention, `sdpa_gqa` (arena/lm/attention.py), against
HF's "sdpa" (every key/value head copied per query head under a mask), same process, same weights,
same mini-batches.

Per env: that budget's BC model, fresh (arena.bc.train.fresh_model, from the expert's demos), and
`--steps` seeded mini-batches of bc.batch_size rows padded as BC pads them. Each repeat times the
forward + backward of `sft_loss` on every mini-batch under both attentions, interleaved (background
load hits both alike); the medians are compared. Equality: the losses (the forward) must be
bit-identical, the gradients equal up to float rounding (max |d| printed).

    python benchmarks/bench_attention.py                       # sokoban and shop, budget=learn, ~2 min
    python benchmarks/bench_attention.py --env shop --budget default

Prints one line per env: seconds per step under each, the ratio sdpa_gqa/sdpa (lower is faster).
"""
from __future__ import annotations

import argparse
import copy
import random
import statistics
import time

import torch

from arena.bc.train import _encode, collect_demos, fresh_model, sft_loss
from arena.config import load_config


def grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])  # [n_params]


def sft_pass(model, batches) -> tuple[float, list[float], torch.Tensor]:
    """(seconds, losses, gradients of the last batch) of forward + backward over `batches`."""
    losses = []
    t0 = time.perf_counter()
    for batch in batches:
        model.zero_grad(set_to_none=True)
        loss = sft_loss(model, *batch)  # scalar
        loss.backward()
        losses.append(float(loss))
    return time.perf_counter() - t0, losses, grads(model)


def bench_env(env: str, budget: str, steps: int, repeats: int) -> dict:
    cfg = load_config([f"env={env}", f"budget={budget}", "seed=0", "env.kwargs.pool=committed"] if env == "household"
                      else [f"env={env}", f"budget={budget}", "seed=0"])
    pairs, _ = collect_demos(cfg, cfg.bc.demos)
    gqa, tok = fresh_model(cfg, pairs)
    gqa.train()
    sdpa = copy.deepcopy(gqa)
    sdpa.set_attn_implementation("sdpa")
    data = _encode(tok, pairs)  # [N, P], [N, P], [N, T], [N, T]
    rng = random.Random(0)
    batches = [[t[rows] for t in data] for rows in
               (torch.tensor(rng.sample(range(len(pairs)), cfg.bc.batch_size)) for _ in range(steps))]
    times = {"sdpa": [], "sdpa_gqa": []}
    out = {}
    for _ in range(repeats):
        for name, model in (("sdpa", sdpa), ("sdpa_gqa", gqa)):
            seconds, losses, g = sft_pass(model, batches)
            times[name].append(seconds / steps)
            out[name] = (losses, g)
    same_loss = out["sdpa"][0] == out["sdpa_gqa"][0]
    d_grad = float((out["sdpa"][1] - out["sdpa_gqa"][1]).abs().max())
    ratio = statistics.median(times["sdpa_gqa"]) / statistics.median(times["sdpa"])
    print(f"{env}:{budget}: {len(pairs)} demo turns, batch {cfg.bc.batch_size}, "
          f"{data[0].shape[1]}+{data[2].shape[1]} tokens a row; SFT step sdpa {statistics.median(times['sdpa']):.3f}s, "
          f"sdpa_gqa {statistics.median(times['sdpa_gqa']):.3f}s: ratio {ratio:.2f}; losses "
          f"{'bit-identical' if same_loss else 'DIFFER'}, gradients max |d| {d_grad:.2e} "
          f"(of max |g| {float(out['sdpa'][1].abs().max()):.2e})", flush=True)
    return {"ratio": ratio, "same_loss": same_loss, "max_grad_diff": d_grad,
            "max_grad": float(out["sdpa"][1].abs().max())}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", nargs="+", default=["sokoban", "shop"])
    ap.add_argument("--budget", default="learn", help="e.g. smoke: its 32-demo BC, for a quick check")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    return {env: bench_env(env, args.budget, args.steps, args.repeats) for env in args.env}


if __name__ == "__main__":
    main()
