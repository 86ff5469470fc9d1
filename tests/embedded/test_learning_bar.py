"""The learning margin (docs/testbed.md, "The learning margin"): on the embedded Sokoban testbed,
`budget=learn` GRPO ends >= 2.5 standard errors above its own step-0 eval on EVERY seed 0-4,
greedy, on the eval set in use (eval.n = 1024 held-out rooms in budget=learn).

    SE = sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n),  p0 = step-0 eval (the BC model), p1 = final eval

Each seed trains its own BC (the seed is in the BC cache key), stopped on the validation band of
budget=learn (the wider model, hidden 96: configs/budget/learn.yaml); the test also checks that
the step-0 success is in the bar's headroom [15%, 70%] and that BC stopped inside its band.

Wall time (2 cores): the five runs share the results dir and go two at a time, one torch thread
each (two 2-thread processes on 2 cores thrash), the next starting as soon as one ends; one run
is BC (~1 min) + 100 RL steps with 25 evals of 1024 rooms (8.7-9.6 min a run measured at load
2.5), so ~30 minutes for the test (2023 s at load ~3). Each run has a 30-minute timeout."""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (0, 1, 2, 3, 4)
PARALLEL = 2
MARGIN_SE = 2.5
RUN_TIMEOUT_S = 30 * 60

pytestmark = pytest.mark.slow


def _launch(seed: int, tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
           "WANDB_MODE": "disabled"}
    log = open(tmp_path / f"rl{seed}.log", "w")
    return subprocess.Popen(
        [sys.executable, "-m", "arena.cli", "train", "budget=learn", "po.method=grpo", f"seed={seed}",
         f"results_dir={tmp_path}", f"out={tmp_path / f'rl{seed}'}"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)


def _run_all(tmp_path: Path) -> list[int]:
    """Runs every seed, PARALLEL at a time; returns the seeds whose run failed."""
    pending, running, failed = list(SEEDS), {}, []
    while pending or running:
        while pending and len(running) < PARALLEL:
            seed = pending.pop(0)
            running[seed] = (_launch(seed, tmp_path), time.monotonic())
        time.sleep(2)
        for seed, (proc, started) in list(running.items()):
            if proc.poll() is None and time.monotonic() - started > RUN_TIMEOUT_S:
                proc.kill()
                proc.wait()
            if proc.poll() is not None:
                del running[seed]
                if proc.returncode != 0:
                    failed.append(seed)
    return failed


# What the testbed showed (docs/testbed.md, "A wider model"): seed 0 44.7% -> 57.0% (+12.3 points,
# 5.6 SE), seed 1 55.0% -> 70.9% (+15.9, 7.6 SE), seeds 2-4 +8.9, +11.6, +6.8 (3.1-5.3 SE) on 1024
# rooms (passed in 2023 s at load ~3); with the tiny model seed 0 stayed
# at 1.3 SE. Asserted:
#   every run finishes, every BC stops in its band, step 0 in the headroom [15%, 70%];
#   per seed: p1_s - p0_s >= 2.5 SE_s (the bar);
#   the mean gain over the five seeds, g = (1/5) sum_s (p1_s - p0_s), is >= 2.5 SE_g with
#   SE_g = sqrt(sum_s SE_s^2) / 5 (independent seeds).
def test_grpo_beats_its_start_beyond_noise_on_every_seed(tmp_path):
    failed = _run_all(tmp_path)
    logs = {s: (tmp_path / f"rl{s}.log").read_text()[-3000:] for s in failed}
    assert not failed, logs
    reports = [json.loads(f.read_text()) for f in sorted((tmp_path / "bc").glob("*/bc.json"))]
    assert len(reports) == len(SEEDS)  # one BC per seed: the seed is in the BC key
    assert all(r["in_band"] for r in reports), [(r["val_success"], r["steps"]) for r in reports]
    lines, gains, variances, below = [], [], [], []
    for seed in SEEDS:
        out = tmp_path / f"rl{seed}"
        n = OmegaConf.load(out / "config.yaml").eval.n
        summary = json.loads((out / "summary.json").read_text())
        p0, p1 = summary["initial_eval_success"], summary["final_eval_success"]
        se = math.sqrt(p0 * (1 - p0) / n + p1 * (1 - p1) / n)
        lines.append(f"seed {seed}: step 0 {p0:.3f} -> {p1:.3f} (+{p1 - p0:.3f}, {(p1 - p0) / se:.2f} SE, n={n})")
        print(lines[-1])
        assert n >= 512
        assert 0.15 <= p0 <= 0.70, f"seed {seed}: step-0 success {p0} outside [0.15, 0.70]"
        gains.append(p1 - p0)
        variances.append(se * se)
        if p1 - p0 < MARGIN_SE * se:
            below.append(seed)
    mean_gain = sum(gains) / len(gains)
    se_mean = math.sqrt(sum(variances)) / len(gains)
    lines.append(f"mean gain {mean_gain:.3f} ({mean_gain / se_mean:.2f} SE of the mean)")
    print(lines[-1])
    assert mean_gain >= MARGIN_SE * se_mean, "\n".join(lines)
    assert not below, f"per-seed bar not met on seeds {below}: " + "; ".join(lines)
