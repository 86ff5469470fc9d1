"""Greedy success of a run's start (its BC checkpoint) and end (its `ckpt/state.pt`) on n held-out
rooms, with the learning margin's SE (docs/testbed.md, "The learning margin"):

    SE = sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n),  gain in SE = (p1 - p0) / SE

Eval never touches the training random state, so this gives what the same run would have
reported at step 0 and at its last checkpoint with `eval.n=n`.

    python scripts/eval_start_and_end.py RUN_DIR N [key=value ...]   # the run's own overrides,
    e.g. budget=learn seed=0 results_dir=/tmp/results (they locate the BC checkpoint)
Prints one JSON line."""
import json
import math
import sys
import time

import torch

from arena.bc.train import load_initial_model
from arena.lm.evaluate import evaluate
from arena.config.load import load_config


def main(argv: list[str]) -> dict:
    run_dir, n, overrides = argv[0], int(argv[1]), argv[2:]
    cfg = load_config(overrides)
    model, tokenizer = load_initial_model(cfg, log=lambda *a: None)
    t0 = time.time()
    p0 = evaluate(model, tokenizer, cfg, n=n)["success_rate"]
    state = torch.load(f"{run_dir}/ckpt/state.pt", map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    p1 = evaluate(model, tokenizer, cfg, n=n)["success_rate"]
    se = math.sqrt(p0 * (1 - p0) / n + p1 * (1 - p1) / n)
    return {"run": run_dir, "step": int(state["step"]), "n": n, "p0": p0, "p1": p1, "gain": p1 - p0,
            "se": se, "gain_in_se": (p1 - p0) / se, "eval_seconds": round(time.time() - t0, 1)}


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python scripts/eval_start_and_end.py RUN_DIR N [key=value ...]")
    print(json.dumps(main(sys.argv[1:])))
