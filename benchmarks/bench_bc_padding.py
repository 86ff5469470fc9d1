"""SFT step time: mini-batches padded to their own longest prompt and reply (`bc.pad_per_batch=true`)
against padding to the whole demo set's (the default).

The demos are the expert's for the environment at `budget=learn` (household: the 1024 training
games of the large pool, which must be in the cache; shop; sokoban), the model is that budget's
BC model, fresh. Each repeat times `--steps` forward + backward passes of `sft_loss` on the same
seeded mini-batches in both modes, interleaved (so background load hits both alike); the medians
are compared.

    python benchmarks/bench_bc_padding.py --env household   # ~1 min on one thread
    python benchmarks/bench_bc_padding.py --env shop --quick

Prints the demo set's padded length, the mean padded length of a mini-batch, one line per repeat
and a final `ratio per_batch/demo_set` line (lower is faster).
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from arena.bc.train import _encode, collect_demos, fresh_model, sft_loss
from arena.lm.micro_batches import trim_padding
from arena.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="household")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="5 steps, 2 repeats")
    args = ap.parse_args()
    steps, repeats = (5, 2) if args.quick else (args.steps, args.repeats)
    torch.set_num_threads(1)
    cfg = load_config([f"env={args.env}", "budget=learn", "seed=0"])
    pairs, _ = collect_demos(cfg, cfg.bc.demos)
    model, tok = fresh_model(cfg, pairs)
    data = _encode(tok, pairs)  # [N, P], [N, P], [N, T], [N, T]
    rng = random.Random(0)
    batches = [[t[rows] for t in data] for rows in
               (torch.tensor(rng.sample(range(len(pairs)), cfg.bc.batch_size)) for _ in range(steps))]
    mean_len = statistics.mean(sum(t.shape[1] for t in trim_padding(*b)[::2]) for b in batches)
    print(f"{args.env}: {len(pairs)} demo turns, batch {cfg.bc.batch_size}; padded length: demo set "
          f"{data[0].shape[1] + data[2].shape[1]}, a mini-batch {mean_len:.0f} on average")

    def timed(per_batch: bool) -> float:
        t0 = time.perf_counter()
        for b in batches:
            sft_loss(model, *(trim_padding(*b) if per_batch else b)).backward()
            model.zero_grad(set_to_none=True)
        return (time.perf_counter() - t0) / steps

    timed(True), timed(False)  # warm-up
    times = {"per_batch": [], "demo_set": []}
    for r in range(repeats):
        for mode in times:
            times[mode].append(timed(mode == "per_batch"))
        print(f"repeat {r}: per_batch {times['per_batch'][-1]:.3f} s/step, demo_set {times['demo_set'][-1]:.3f} s/step")
    ratio = statistics.median(times["per_batch"]) / statistics.median(times["demo_set"])
    print(f"ratio per_batch/demo_set {ratio:.2f} (median s/step)")


if __name__ == "__main__":
    main()
