"""Today's code against a pinned older commit (code users had), whole `arena train` runs, in one session.

The speed reference is not a reconstruction: `git archive <ref>` unpacks the pinned commit into a
temporary folder, and each repeat runs, one after the other (interleaved, so that the machine's
drift hits both alike),

    reference: PYTHONPATH=<that folder> python -m arena train <case> model.path=<BC> steps=N
    today:     PYTHONPATH=<this checkout> python -m arena train <the same>

from the SAME behaviour-cloned checkpoint (trained once, by today's code, into the temporary
results dir), on the same seed, with the same thread count. Each run's own `perf/*` metrics give
the RL step split (rollout, log-probs, update) per training step; the wall time of the process is
measured too. Printed: per path the median over repeats of the mean seconds per training step
(steps >= 1) and its parts, and the ratio today / reference (lower is faster).

The default reference, 675e8b0, is main as users had it before the sampler and update speed work
(docs/testbed.md, "The main job under regime B" names the speed work that followed it). The default
case is the main job's cell shape (Sokoban, budget=stress: 16 optimizer steps per rollout step).

    python benchmarks/bench_vs_commit.py                       # ~6 min on 2 cores
    python benchmarks/bench_vs_commit.py --ref 675e8b0 --steps 4 --repeats 3 --threads 1
    python benchmarks/bench_vs_commit.py --case env=sokoban budget=default
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

HERE = Path(__file__).resolve().parents[1]
# The CLI of whichever arena PYTHONPATH names (older commits have no `python -m arena`).
CLI = "import sys; from arena.cli import main; sys.exit(main(sys.argv[1:]))"
PARTS = ("perf/step_seconds", "perf/rollout_seconds", "perf/logprob_seconds", "perf/update_seconds")


def unpack(ref: str, into: Path) -> Path:
    """The pinned commit's tree in `into` (git archive: no worktree, no change to this checkout)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_train(tree: Path, args: list[str], threads: int, log: Path) -> float:
    """One `arena train` of the code in `tree`; returns its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "WANDB_MODE": "disabled"}
    t = time.perf_counter()
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", CLI, "train", *args], cwd=tree, env=env, check=True,
                       stdout=out, stderr=subprocess.STDOUT)
    return time.perf_counter() - t


def step_means(run_dir: Path) -> dict[str, float]:
    """Mean over training steps (>= 1) of each perf/* part, from the run's metrics.jsonl."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("step", 0) >= 1 and "perf/step_seconds" in r]
    return {k: statistics.mean(r[k] for r in rows if k in r) for k in PARTS}


def find_run(results: Path) -> Path:
    """The run folder `arena train` wrote under a fresh results dir (the only metrics.jsonl there)."""
    found = sorted(results.rglob("metrics.jsonl"))
    if len(found) != 1:
        raise SystemExit(f"expected one run under {results}, found {len(found)}")
    return found[0].parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", default="675e8b0", help="the pinned older commit")
    p.add_argument("--case", nargs="*", default=["env=sokoban", "budget=stress", "po.method=grpo"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_vs_commit_") as tmp:
        tmp = Path(tmp)
        trees = {"reference": unpack(a.ref, tmp / "ref"), "today": HERE}
        base = [*a.case, "seed=0", "wandb.enabled=false", "test_freq=1000", "eval.n=32", "save_freq=1000"]
        print(f"BC once (today's code): {' '.join(base)}", flush=True)
        run_train(HERE, [*base, "steps=1", f"results_dir={tmp / 'bc'}"], a.threads, tmp / "bc.log")
        bc = sorted((tmp / "bc" / "bc").glob("*/model"))
        if len(bc) != 1:
            raise SystemExit(f"expected one BC checkpoint under {tmp / 'bc' / 'bc'}, found {bc}")
        seen: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
        for i in range(a.repeats):
            for name, tree in trees.items():
                res = tmp / f"{name}{i}"
                wall = run_train(tree, [*base, f"steps={a.steps}", f"model.path={bc[0]}", f"results_dir={res}"],
                                 a.threads, tmp / f"{name}{i}.log")
                seen[name].append({**step_means(find_run(res)), "wall": wall})
                print(f"  repeat {i} {name:9s} step {seen[name][-1]['perf/step_seconds']:.2f} s, wall {wall:.1f} s",
                      flush=True)
    print(f"\nmedians over {a.repeats} interleaved repeats, {a.threads} thread(s), ref {a.ref}, "
          f"case {' '.join(a.case)}, {a.steps} steps")
    for key in (*PARTS, "wall"):
        ref, new = (statistics.median(r[key] for r in seen[n]) for n in ("reference", "today"))
        print(f"  {key:24s} reference {ref:8.2f}  today {new:8.2f}  ratio {new / ref:.2f}")


if __name__ == "__main__":
    main()
