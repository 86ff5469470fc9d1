"""One verl step on the CPU against one embedded-backend step, same config, same run.

Runs `arena train backend=embedded` and `arena train backend=verl` (device=cpu, rollout.name=arena)
on the same config (default `env=sokoban budget=smoke`) and the same results_dir (so both start
from the same BC checkpoint), then reads each run's metrics.jsonl and prints, per phase, the
median over the training steps 2..N (step 1 pays one-off warm-ups on both backends):

    verl:      rollout = timing_s/gen, old log-probs = timing_s/old_log_prob,
               reference log-probs = timing_s/ref, update = timing_s/update_actor,
               weight sync = timing_s/update_weights,
               verl overhead = timing_s/step - the phases above; eval = timing_s/testing
               (verl times it outside its step timer, so step = timing_s/step + eval here)
    embedded:  rollout = perf/rollout_seconds, log-probs = perf/logprob_seconds (old + reference),
               update = perf/update_seconds, eval and the rest = perf/step_seconds - the three

and the ratio verl step / embedded step. Both step times include that step's eval (test_freq);
the ratio is measured in one invocation, so machine load affects both sides alike. The run
start-up (BC, Ray head, verl's worker groups) is printed separately as wall time.

Usage: python benchmarks/bench_verl.py [key=value ...]   (extra keys go to both runs)
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERL_PHASES = (("rollout", "timing_s/gen"), ("old log-probs", "timing_s/old_log_prob"),
               ("reference log-probs", "timing_s/ref"), ("update", "timing_s/update_actor"),
               ("weight sync", "timing_s/update_weights"), ("eval", "timing_s/testing"))
EMBEDDED_PHASES = (("rollout", "perf/rollout_seconds"), ("log-probs (old + reference)", "perf/logprob_seconds"),
                   ("update", "perf/update_seconds"))


def run(backend: str, out: Path, results: Path, extra: list[str]) -> tuple[list[dict], float]:
    """Train one run in a subprocess; (its metrics rows, wall seconds). Exits on failure."""
    cmd = [sys.executable, "-m", "arena.cli", "train", f"backend={backend}", "env=sokoban", "budget=smoke",
           f"out={out}", f"results_dir={results}", "wandb.enabled=false", *extra]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    print(f"[bench_verl] {' '.join(cmd[2:])}", flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"[bench_verl] {backend} run failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, wall


def median(rows: list[dict], key: str) -> float:
    """Median of `key` over the training rows after the first (all training rows if only one)."""
    train = [r for r in rows if r.get("step", 0) >= 1 and key in r]
    values = [float(r[key]) for r in (train[1:] or train)]
    return statistics.median(values) if values else float("nan")


def main(argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-verl-") as tmp:
        tmp = Path(tmp)
        emb_rows, emb_wall = run("embedded", tmp / "embedded", tmp / "results", argv)  # trains the shared BC
        verl_rows, verl_wall = run("verl", tmp / "verl", tmp / "results", argv)
    verl = {name: median(verl_rows, key) for name, key in VERL_PHASES if name != "eval"}
    verl["verl overhead"] = median(verl_rows, "timing_s/step") - sum(verl.values())
    verl["eval"] = median(verl_rows, "timing_s/testing")
    verl_step = sum(verl.values())  # timing_s/step + its eval, as the embedded step
    emb = {name: median(emb_rows, key) for name, key in EMBEDDED_PHASES}
    emb_step = median(emb_rows, "perf/step_seconds")
    emb["eval and the rest"] = emb_step - sum(emb.values())
    print("\nverl step (device=cpu, rollout.name=arena), median seconds:")
    for name, value in verl.items():
        print(f"  {name:<28} {value:8.3f}  ({value / verl_step:5.1%})")
    print(f"  {'step':<28} {verl_step:8.3f}")
    print("embedded step, median seconds:")
    for name, value in emb.items():
        print(f"  {name:<28} {value:8.3f}  ({value / emb_step:5.1%})")
    print(f"  {'step':<28} {emb_step:8.3f}")
    ratio = verl_step / emb_step
    print(f"\nratio verl step / embedded step: {ratio:.2f}")
    print(f"whole run wall time (BC cached for verl, Ray start-up included): embedded {emb_wall:.0f} s, "
          f"verl {verl_wall:.0f} s")
    return {"verl": verl, "verl_step": verl_step, "embedded": emb, "embedded_step": emb_step, "ratio": ratio,
            "embedded_wall": emb_wall, "verl_wall": verl_wall}


if __name__ == "__main__":
    main(sys.argv[1:])
