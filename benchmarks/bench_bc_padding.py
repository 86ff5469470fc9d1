"""SFT step time: mini-batches padded to their own longest prompt and reply (`bc.pad_per_batch=true`)
against padding to the whole demo set's (the default), and length-grouped mini-batches
(`bc.group_by_length=true`: arena/bc/train.py's length_grouped_batches, transformers'
LengthGroupedSampler, each mini-batch padded to its own longest demo; other rows than the uniform
draws, as many steps).

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

from arena.bc.train import _encode, collect_demos, fresh_model, length_grouped_batches, sft_loss
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
    lengths = (data[1].sum(dim=1) + data[3].sum(dim=1)).tolist()  # N ints
    pool, grouped_rows, generator = [], [], torch.Generator().manual_seed(0)
    for _ in range(steps):
        pool = pool or length_grouped_batches(lengths, cfg.bc.batch_size, generator)
        grouped_rows.append(torch.tensor(pool.pop(0)))
    grouped = [[t[rows] for t in data] for rows in grouped_rows]
    mean_len = statistics.mean(sum(t.shape[1] for t in trim_padding(*b)[::2]) for b in batches)
    grouped_len = statistics.mean(sum(t.shape[1] for t in trim_padding(*b)[::2]) for b in grouped)
    print(f"{args.env}: {len(pairs)} demo turns, batch {cfg.bc.batch_size}; padded length: demo set "
          f"{data[0].shape[1] + data[2].shape[1]}, a mini-batch {mean_len:.0f} on average, "
          f"a length-grouped one {grouped_len:.0f}")

    def timed(mode: str) -> float:
        t0 = time.perf_counter()
        for b in grouped if mode == "grouped" else batches:
            sft_loss(model, *(b if mode == "demo_set" else trim_padding(*b))).backward()
            model.zero_grad(set_to_none=True)
        return (time.perf_counter() - t0) / steps

    times = {"per_batch": [], "demo_set": [], "grouped": []}
    for mode in times:
        timed(mode)  # warm-up
    for r in range(repeats):
        for mode in times:
            times[mode].append(timed(mode))
        print(f"repeat {r}: " + ", ".join(f"{mode} {times[mode][-1]:.3f} s/step" for mode in times))
    median = {mode: statistics.median(v) for mode, v in times.items()}
    print(f"ratio per_batch/demo_set {median['per_batch'] / median['demo_set']:.2f}, "
          f"grouped/demo_set {median['grouped'] / median['demo_set']:.2f} (median s/step)")


if __name__ == "__main__":
    main()
