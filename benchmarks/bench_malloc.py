"""glibc malloc tuned (arena/malloc_tuning.py) against glibc's defaults, on arena's own paths.

The setting is per process and cannot be undone, so each side runs in a fresh child process:
two children at once, one thread each, one with ARENA_MALLOC_TUNING=1 and one with =0 (so the
machine's drift hits both alike), `--pairs` times, the start order swapped each time. Workloads:
- sampler: bench_sampler.py's batch (128 distinct prompts of 40-80 tokens, 16 new tokens, the
  "small" model): the median of `--calls` timed `sample_tokens` calls after 2 warm-up ones;
- train: `arena train env=sokoban budget=default steps=--steps` (the main job's cell, shortened)
  from one BC checkpoint trained before the pairs (in a temporary results_dir): the summed
  perf/* seconds of its metrics.jsonl (rollout, log-probs, update, the eval steps, all steps).
Prints per child its seconds and minor page faults (os.wait4's rusage of that child), and per
pair the ratio tuned / untuned (lower is faster). The train children must end on the same final
eval success (the allocator decides where tensors live, not what is computed).

    python benchmarks/bench_malloc.py              # sampler and train, 2 pairs each: ~4 min on 2 cores
    python benchmarks/bench_malloc.py --quick      # sampler only, 1 pair: ~20 s
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# argv[1]: timed calls. Prints JSON: tuned?, median seconds a call, minor page faults a call (after
# 2 warm-up calls), the tokens (tests/test_malloc_tuning.py runs it too).
SAMPLER_CHILD = """
import json, resource, sys, time
import torch
from arena.malloc_tuning import tune_malloc
from arena.lm.model import build_model
from arena.lm.sampler import sample_tokens
tuned = tune_malloc()
torch.set_num_threads(1)
model = build_model(1024, size="small", seed=0, attn_implementation="sdpa")
g = torch.Generator().manual_seed(0)
prompts = [torch.randint(3, 1024, (int(n),), generator=g).tolist() for n in torch.randint(40, 81, (128,), generator=g)]
def call():
    return sample_tokens(model, prompts, temperature=1.0, max_new_tokens=16, generator=torch.Generator().manual_seed(1))
for _ in range(2):
    call()
seconds, calls = [], int(sys.argv[1])
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(calls):
    start = time.perf_counter(); tokens = call(); seconds.append(time.perf_counter() - start)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls
print(json.dumps({"tuned": tuned, "seconds": sorted(seconds)[len(seconds) // 2], "faults_per_call": faults,
                  "tokens": [t for t, _ in tokens]}))
"""
PERF_KEYS = ("perf/rollout_seconds", "perf/logprob_seconds", "perf/update_seconds")


def child_env(tuned: bool) -> dict[str, str]:
    return {**os.environ, "ARENA_MALLOC_TUNING": "1" if tuned else "0", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "WANDB_MODE": "disabled"}


def run_pair(commands: dict[bool, list[str]], first: bool) -> dict[bool, dict]:
    """Start both children (`first`'s side first), wait for each; {tuned: {stdout, faults, wall}}."""
    procs, started = {}, time.perf_counter()
    for tuned in (first, not first):
        procs[tuned] = subprocess.Popen(commands[tuned], env=child_env(tuned), stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
    out = {}
    for tuned, proc in procs.items():
        stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"child (tuned={tuned}) failed with exit {proc.returncode}: {' '.join(commands[tuned])}")
        out[tuned] = {"stdout": stdout, "faults": usage.ru_minflt, "wall": time.perf_counter() - started}
    return out


def sampler_pairs(pairs: int, calls: int) -> list[float]:
    commands = {t: [sys.executable, "-c", SAMPLER_CHILD, str(calls)] for t in (True, False)}
    ratios = []
    for i in range(pairs):
        res = run_pair(commands, first=i % 2 == 0)
        got = {t: json.loads(r["stdout"]) for t, r in res.items()}
        assert got[True]["tuned"] and not got[False]["tuned"], "ARENA_MALLOC_TUNING did not take effect"
        same = got[True]["tokens"] == got[False]["tokens"]
        ratio = got[True]["seconds"] / got[False]["seconds"]
        ratios.append(ratio)
        print(f"sampler pair {i}: tuned {got[True]['seconds'] * 1e3:.0f} ms/call ({got[True]['faults_per_call']:.0f} "
              f"faults/call), untuned {got[False]['seconds'] * 1e3:.0f} ms/call ({got[False]['faults_per_call']:.0f}); "
              f"ratio {ratio:.2f}; tokens identical: {'yes' if same else 'NO'}", flush=True)
    return ratios


def train_totals(out: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    totals = {k: sum(r.get(k, 0.0) for r in rows) for k in (*PERF_KEYS, "perf/step_seconds")}
    totals["eval steps"] = sum(r["perf/step_seconds"] - sum(r.get(k, 0.0) for k in PERF_KEYS)
                               for r in rows if "eval/success_rate" in r)
    totals["final eval"] = json.loads((out / "summary.json").read_text()).get("final_eval_success")
    return totals


def train_pairs(pairs: int, steps: int, results: Path) -> list[float]:
    arena = str(Path(sys.executable).with_name("arena"))
    base = [arena, "train", "env=sokoban", "budget=default", "po.method=grpo", "seed=0", "wandb.enabled=false",
            f"results_dir={results}"]
    print("train: BC checkpoint (once, before the pairs) ...", flush=True)
    subprocess.run(base + ["steps=1", f"out={results / 'warmup'}"], env=child_env(True), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ratios = []
    for i in range(pairs):
        outs = {t: results / f"pair{i}_{'tuned' if t else 'untuned'}" for t in (True, False)}
        res = run_pair({t: base + [f"steps={steps}", f"out={outs[t]}"] for t in (True, False)}, first=i % 2 == 0)
        tot = {t: train_totals(outs[t]) for t in (True, False)}
        ratio = tot[True]["perf/step_seconds"] / tot[False]["perf/step_seconds"]
        ratios.append(ratio)
        for t in (True, False):
            parts = ", ".join(f"{k.removeprefix('perf/').removesuffix('_seconds')} {tot[t][k]:.1f}"
                              for k in (*PERF_KEYS, "eval steps"))
            side = "tuned  " if t else "untuned"
            print(f"train pair {i} {side}: steps {tot[t]['perf/step_seconds']:.1f} s ({parts}); "
                  f"{res[t]['faults']} faults; final eval {tot[t]['final eval']}", flush=True)
        same = tot[True]["final eval"] == tot[False]["final eval"]
        print(f"train pair {i}: ratio tuned/untuned {ratio:.3f} (steps' seconds); final eval identical: "
              f"{'yes' if same else 'NO'}", flush=True)
    return ratios


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sampler only, one pair")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--calls", type=int, default=9, help="timed sampler calls per child")
    ap.add_argument("--steps", type=int, default=20, help="RL steps per train child")
    args = ap.parse_args(argv)
    out = {"sampler": sampler_pairs(1 if args.quick else args.pairs, args.calls)}
    if not args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            out["train"] = train_pairs(args.pairs, args.steps, Path(tmp))
    for name, ratios in out.items():
        print(f"{name}: ratio tuned/untuned {statistics.median(ratios):.3f} "
              f"(median of {len(ratios)} pair(s); lower is faster)")
    return out


if __name__ == "__main__":
    main()
