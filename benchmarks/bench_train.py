"""Training throughput of the embedded backend, as ratios measured in one run.

1. MFU: training tokens/s of the default model (forward + backward + AdamW on prompt++response
   sequences), against the fp32 matmul peak of this machine measured in the same run:
       peak   = 2 n^3 / t(n x n @ n x n)                          (FLOP/s, n = 1024)
       FLOPs  = 6 N D + 12 n_layer d_model S D                    (per training batch)
   with N the non-embedding parameters, D = tokens in the batch, S = sequence length (the
   attention term of the PaLM appendix). MFU = (FLOPs / t_step) / peak. Target >= 15%.
2. One default RL step on Sokoban, split into rollout (and the environments' + rollout loop's
   share of it), log-probs and update, from the trainer's own perf/* metrics. Target: that
   share < 10% of rollout time.

Usage: python benchmarks/bench_train.py [--quick] [--threads N]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch


def matmul_peak(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s (2 n^3 per product) of the faster float32 n x n matmul this torch has: torch's mm
    (MKL's sgemm on the CPU) or oneDNN's linear, the model's (arena/lm/linear_kernel.py)."""
    from arena.lm.linear_kernel import onednn_available, onednn_linear

    a, b = torch.randn(n, n), torch.randn(n, n)
    kernels = [lambda: a @ b]
    if onednn_available():
        kernels.append(lambda: onednn_linear(a, b, None))
    best = 0.0
    for kernel in kernels:
        kernel()  # warm-up
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            kernel()
            times.append(time.perf_counter() - t)
        best = max(best, 2 * n**3 / statistics.median(times))
    return best


def training_flops(model, tokens: int, seq: float) -> float:
    """FLOPs of one forward+backward over `tokens` tokens of sequences of length `seq`:
    6 N D + 12 n_layer d_model S D (N non-embedding parameters, D = tokens, S = seq)."""
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    c = model.config
    return 6 * n_params * tokens + 12 * c.num_hidden_layers * c.hidden_size * seq * tokens


def training_flops_per_s(cfg, batch: int, repeats: int) -> tuple[float, float, str]:
    from arena.bc.train import _encode, collect_demos, sft_loss
    from arena.lm.model import build_model
    from arena.lm.tokenizer import build_tokenizer

    pairs, _ = collect_demos(cfg, 200)
    tok = build_tokenizer([p + r for p, r in pairs], vocab_size=cfg.model.vocab_size, kind=cfg.model.tokenizer)
    model = build_model(len(tok), size=cfg.model.size, pad_token_id=tok.pad_token_id)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tensors = [t[:batch] for t in _encode(tok, pairs)]
    seq = tensors[0].shape[1] + tensors[2].shape[1]  # padded S
    tokens = batch * seq
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    c = model.config
    flops = training_flops(model, tokens, seq)
    times = []
    for i in range(repeats + 1):
        t = time.perf_counter()
        loss = sft_loss(model, *tensors)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i:
            times.append(time.perf_counter() - t)
    step = statistics.median(times)
    formula = f"6*N*D + 12*L*d*S*D with N={n_params} (non-embedding), D={tokens} tokens, L={c.num_hidden_layers}, d={c.hidden_size}, S={seq}"
    return flops / step, tokens / step, formula


def rl_step_split(quick: bool) -> dict:
    from arena.bc.train import load_initial_model
    from arena.backends.embedded.trainer import train
    from arena.config import load_config
    from arena.runs import RunFolder

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"results_dir={tmp}", "wandb.enabled=false", "steps=3", "test_freq=1000", "eval.n=8",
                     "bc.steps=20" if quick else "bc.steps=200", "bc.eval_n=8"]
        if quick:
            overrides += ["batch_envs=2", "group_size=4"]
        cfg = load_config(overrides)
        model, tok = load_initial_model(cfg, log=lambda *_: None)
        run = RunFolder(f"{tmp}/run")
        train(cfg, run, model, tok, log=lambda *_: None)
        rows = [r for r in run.read_metrics() if r["step"] > 0]
    keys = ("perf/rollout_seconds", "perf/env_seconds", "perf/logprob_seconds", "perf/update_seconds", "rollout/turn_samples")
    return {k: statistics.median(r[k] for r in rows) for k in keys}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from arena.config import load_config

    cfg = load_config([])
    peak = matmul_peak(512 if args.quick else 1024)
    achieved, tok_s, formula = training_flops_per_s(cfg, batch=16 if args.quick else 64, repeats=2 if args.quick else 5)
    split = rl_step_split(args.quick)
    mfu = achieved / peak
    share = split["perf/env_seconds"] / split["perf/rollout_seconds"]
    print(f"threads={torch.get_num_threads()} fp32 matmul peak {peak / 1e9:.1f} GFLOP/s")
    print(f"training: {tok_s:.0f} tokens/s, {achieved / 1e9:.2f} GFLOP/s, MFU {100 * mfu:.1f}% (target >= 15%)")
    print(f"  FLOPs = {formula}")
    total = split["perf/rollout_seconds"] + split["perf/logprob_seconds"] + split["perf/update_seconds"]
    print(f"RL step ({split['rollout/turn_samples']:.0f} turn-samples): rollout {split['perf/rollout_seconds']:.3f}s "
          f"({100 * split['perf/rollout_seconds'] / total:.0f}%), log-probs {split['perf/logprob_seconds']:.3f}s, "
          f"update {split['perf/update_seconds']:.3f}s; envs + rollout loop = {100 * share:.1f}% of rollout (target < 10%)")
    return {"mfu": mfu, "env_share": share, **split}


if __name__ == "__main__":
    main()
