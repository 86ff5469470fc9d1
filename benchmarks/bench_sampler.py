"""Sampler throughput: arena's `sample_tokens` against `model.generate`, and against the
sampler kept in benchmarks/reference_sampler.py (the "before" of the speed work).

Same weights, same left-padded batch of distinct prompts, same temperature, same number of new
tokens (no stop token, so every row generates exactly `new_tokens`). Ours runs the model as arena
builds it (linear layers on oneDNN, arena/lm/linear_kernel.py); `generate` and the reference run
its twin with torch's linear layers (reference_sampler.torch_linear_twin), as they did before; ours
on that twin is timed too ("ours, torch linear"), which splits the sampler's gain from the
kernel's. The four are timed in turn for each repeat (interleaved, so background load hits all
alike); the medians are compared. The current and the reference sampler draw from generators with the same seed, and
the script prints whether their tokens (and log-probs) are identical (log-probs: else their largest
difference, float rounding from the prefill's trimmed last layer).

    python benchmarks/bench_sampler.py            # batch 128, prompts 40-80 tokens, 16 new
    python benchmarks/bench_sampler.py --quick    # a few seconds

Prints one line per repeat and a final `ratio ours/generate` line (target >= 2.5x), the ratio of
the median rates, with the best-of-repeats ratio and the reference sampler's ratio beside it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from arena.lm.model import build_model
from arena.lm.sampler import left_pad, sample_tokens
from arena.malloc_tuning import tune_malloc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_sampler  # noqa: E402  (benchmarks/ is not a package)
from kernel_floor import kernel_seconds  # noqa: E402


def run(*, size: str, vocab: int, batch: int, min_len: int, max_len: int, new_tokens: int, repeats: int,
        temperature: float, attn: str, group_size: int = 1, seed: int = 0) -> dict:
    model = build_model(vocab, size=size, seed=seed, attn_implementation=attn)
    plain = reference_sampler.torch_linear_twin(model)  # same weights, torch's linear layers
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (batch,), generator=g).tolist()
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in lengths]
    prompts = [p for p in prompts[: batch // group_size] for _ in range(group_size)]  # groups share a prompt
    ids, mask = left_pad(prompts, 0, "cpu")  # [B, P] each
    n_tokens = batch * new_tokens

    outputs = {}

    def sampler(name, fn, on=model):
        def call() -> None:
            out = fn(on, prompts, temperature=temperature, max_new_tokens=new_tokens, pad_token_id=0,
                     generator=torch.Generator().manual_seed(1))
            assert all(len(t) == new_tokens for t, _ in out)
            outputs[name] = out
        return call

    ours, reference = sampler("ours", sample_tokens), sampler("reference", reference_sampler.sample_tokens)
    ours_torch_linear = sampler("ours_torch_linear", sample_tokens, on=plain)

    @torch.no_grad()
    def theirs() -> None:
        out = plain.generate(input_ids=ids, attention_mask=mask, do_sample=temperature > 0,
                             temperature=temperature or None,
                             top_p=1.0, top_k=None, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             pad_token_id=0, eos_token_id=None)
        assert out.shape[1] == ids.shape[1] + new_tokens

    paths = (("ours", ours), ("generate", theirs), ("reference", reference), ("ours_torch_linear", ours_torch_linear))
    for _, fn in paths:  # warm-up
        fn()
    rates = {name: [] for name, _ in paths}
    for r in range(repeats):
        for name, fn in paths:
            start = time.perf_counter()
            fn()
            rates[name].append(n_tokens / (time.perf_counter() - start))
        print(f"repeat {r}: " + ", ".join(f"{name} {rates[name][-1]:.0f} tok/s" for name, _ in paths), flush=True)
    ours_rate, gen_rate, ref_rate, ours_torch_rate = (statistics.median(rates[k]) for k, _ in paths)
    # ours can take no less time than its matmuls and attention take: ratio <= generate's time / that
    ceiling = (n_tokens / gen_rate) / kernel_seconds(ours, torch.get_num_threads())
    best_ratio = max(rates["ours"]) / max(rates["generate"])
    return {"ours_tok_s": ours_rate, "generate_tok_s": gen_rate, "ratio": ours_rate / gen_rate,
            "best_ratio": best_ratio, "reference_ratio": ref_rate / gen_rate, "kernel_ceiling": ceiling,
            "torch_linear_ratio": ours_torch_rate / gen_rate,
            "tokens_identical": [t for t, _ in outputs["ours"]] == [t for t, _ in outputs["reference"]],
            "logp_identical": [lp for _, lp in outputs["ours"]] == [lp for _, lp in outputs["reference"]],
            # the linear layers' kernels and the prefill's trimmed last layer (arena/lm/last_positions.py)
            # round differently
            "logp_max_diff": max((abs(a - b) for (_, la), (_, lb) in zip(outputs["ours"], outputs["reference"])
                                  for a, b in zip(la, lb)), default=0.0)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny model, batch 16, 2 repeats")
    ap.add_argument("--size", default="small")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--group-size", type=int, default=1, help="rows sharing each prompt (as in GRPO groups)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (0: torch's default). 1 by default: on a shared 2-core box, 2 OpenMP "
                         "threads stall whenever another process holds a core, and the timings become noise")
    args = ap.parse_args(argv)
    tuned = tune_malloc()  # as every arena process (arena/malloc_tuning.py); generate runs under it too
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = dict(size=args.size, vocab=args.vocab, batch=args.batch, min_len=40, max_len=80,
                   new_tokens=args.new_tokens, repeats=args.repeats, temperature=args.temperature, attn=args.attn,
                   group_size=args.group_size)
    if args.quick:
        setting.update(size="tiny", batch=16, min_len=10, max_len=20, new_tokens=8, repeats=2)
    print(f"setting: {setting}, torch threads {torch.get_num_threads()}, glibc malloc tuned: {'yes' if tuned else 'no'}")
    result = run(**setting)
    print(f"ours {result['ours_tok_s']:.0f} tok/s, generate {result['generate_tok_s']:.0f} tok/s, "
          f"ratio ours/generate {result['ratio']:.2f}x (medians; best-of-repeats ratio {result['best_ratio']:.2f}x; "
          f"reference sampler {result['reference_ratio']:.2f}x; ours with torch's linear layers "
          f"{result['torch_linear_ratio']:.2f}x); ours in its matmul and attention kernels alone "
          f"would be {result['kernel_ceiling']:.2f}x, the most this ratio can reach without cutting their work")
    print(f"same seed, ours vs reference: tokens identical: {'yes' if result['tokens_identical'] else 'NO'}; "
          f"log-probs identical: {'yes' if result['logp_identical'] else 'no, max |d| = %.2e' % result['logp_max_diff']}")
    return result


if __name__ == "__main__":
    main()
