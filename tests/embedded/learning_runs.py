"""The harness of the learning tests (test_learning_bar.py: Sokoban; test_shop_learning.py: shop;
test_household_learning.py): one `arena train` subprocess per seed with one torch thread (two
2-thread processes on 2 cores thrash), and the bar they check.

    SE_s = sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n),  p0 = step-0 eval (the BC model), p1 = final eval
           (or, paired by episode: sd(d) / sqrt(n), d_i = won_final(i) - won_step0(i), the same
           n held-out episodes; summary.json's gain_paired_se)
    bar per seed: p1_s - p0_s >= margin * SE_s
    mean gain g = (1/S) sum_s (p1_s - p0_s) >= margin * SE_g,  SE_g = sqrt(sum_s SE_s^2) / S

Each seed is its own test item (the slow stage spreads them over two workers: tests/slow_schedule.py),
so each checks its own bar. The mean bar needs no item of its own: it follows from the per-seed
bars, since sqrt(sum_s SE_s^2) <= sum_s SE_s (square both sides: the right adds the cross terms
2 SE_s SE_r >= 0), so SE_g <= (1/S) sum_s SE_s and g >= (1/S) sum_s margin SE_s >= margin SE_g.

On held-out seeds the claim is the mean gain under arena's verdict rule (`record_gain`,
`mean_verdict_when_complete`): the per-seed bar above holds on the seeds a recipe was tuned on
but not on every seed it was not (docs/testbed.md, "The learning margin on held-out seeds").
Each seed's item writes its gain to a folder the whole pytest session shares; the item that
finds every seed's gain there applies `arena.analysis.verdicts.compare` to the gains (points) and
asserts "better". At least one item sees them all: item a writes, then lists; item b too; if a
lists before b writes, then a's write came before b's list, so b sees a's gain.

The runs evaluate at step 0 and the last step only (`ENDS_ONLY`): the bar reads p0 and p1, and
evaluation does not touch the training (its own env copies, greedy, no RNG draw), so p1 is the
number a run with the full eval schedule ends on; only the run's stability verdict has fewer
points. Checked on Sokoban seed 0 and shop seed 0: every training metric of every step and the
final eval equal, digit for digit, those of the full-schedule runs (docs/testbed.md, "The slow
stage on two workers").
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
# evals at step 0 and the last step only: no final-window evals, test_freq above every budget's steps
ENDS_ONLY = ["eval.final_window=false", "test_freq=100000"]


def launch(args: list[str], seed: int, tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
           "WANDB_MODE": "disabled"}
    with open(tmp_path / f"rl{seed}.log", "w") as log:  # the child keeps its own copy of the handle
        return subprocess.Popen(
            [sys.executable, "-m", "arena.cli", "train", *args, f"seed={seed}",
             f"results_dir={tmp_path}", f"out={tmp_path / f'rl{seed}'}"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)


def run_seed(args: list[str], seed: int, tmp_path: Path, *, timeout_s: float) -> bool:
    """Runs one seed's `arena train`; a run past timeout_s is killed. True iff it exited 0."""
    proc = launch(args, seed, tmp_path)
    try:
        return proc.wait(timeout=timeout_s) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


def named_on_command_line(config, test_file: str) -> bool:
    """test_file (or one of its items, `file::name`) is among pytest's arguments, relative to
    the directory pytest was started in or absolute: an opt-in test runs only when asked for."""
    here = Path(test_file).resolve()
    start = Path(config.invocation_params.dir)
    return any((start / arg.split("::")[0]).resolve() == here for arg in config.args)


def failed_logs(failed, tmp_path: Path) -> dict:
    return {s: (tmp_path / f"rl{s}.log").read_text()[-3000:] for s in failed}


def gains(seeds, tmp_path: Path) -> list[dict]:
    """Per seed: n (eval episodes), p0, p1, the gain and its SE, read from the run folders."""
    rows = []
    for seed in seeds:
        out = tmp_path / f"rl{seed}"
        n = OmegaConf.load(out / "config.yaml").eval.n
        summary = json.loads((out / "summary.json").read_text())
        p0, p1 = summary["initial_eval_success"], summary["final_eval_success"]
        se = math.sqrt(p0 * (1 - p0) / n + p1 * (1 - p1) / n)
        se_paired = summary.get("gain_paired_se")  # by episode (docs/design.md, summary.json)
        rows.append(dict(seed=seed, n=n, p0=p0, p1=p1, gain=p1 - p0, se=se, se_paired=se_paired))
        paired = f", {(p1 - p0) / se_paired:.2f} paired SE" if se_paired else ""
        print(f"seed {seed}: step 0 {p0:.3f} -> {p1:.3f} ({p1 - p0:+.3f}, {(p1 - p0) / se:.2f} SE{paired}, n={n})")
    return rows


def mean_gain(rows: list[dict]) -> tuple[float, float]:
    """(g, SE_g) over independent seeds (module docstring)."""
    g = sum(r["gain"] for r in rows) / len(rows)
    return g, math.sqrt(sum(r["se"] ** 2 for r in rows)) / len(rows)


def assert_bc_in_band(tmp_path: Path, n_seeds: int) -> None:
    """One band BC per seed (the seed is in the BC key), each stopped inside its band."""
    reports = [json.loads(f.read_text()) for f in sorted((tmp_path / "bc").glob("*/bc.json"))]
    assert len(reports) == n_seeds
    assert all(r["in_band"] for r in reports), [(r["val_success"], r["steps"]) for r in reports]


def assert_headroom(rows: list[dict], *, min_n: int, headroom=(0.15, 0.70)) -> None:
    """Every run's n >= min_n and its step-0 success inside `headroom` (room to gain and to fall)."""
    for r in rows:
        assert r["n"] >= min_n, f"seed {r['seed']}: n = {r['n']} < {min_n}"
        assert headroom[0] <= r["p0"] <= headroom[1], f"seed {r['seed']}: step-0 success {r['p0']} outside {headroom}"


def assert_bar(seeds, tmp_path: Path, *, margin: float, min_n: int, headroom=(0.15, 0.70), paired: bool = False) -> None:
    """Every run's n >= min_n and step-0 success inside `headroom`; the mean gain >= margin SE_g;
    every seed's gain >= margin SE_s (module docstring). `paired`: SE_s is the gain's SE paired by
    episode (summary.json's gain_paired_se) instead of the two-sample SE."""
    rows = gains(seeds, tmp_path)
    if paired:
        assert all(r["se_paired"] for r in rows), "a run without gain_paired_se (no eval_wins?)"
        rows = [{**r, "se": r["se_paired"]} for r in rows]
    assert_headroom(rows, min_n=min_n, headroom=headroom)
    lines = [f"seed {r['seed']}: {r['p0']:.3f} -> {r['p1']:.3f} ({r['gain'] / r['se']:.2f} SE)" for r in rows]
    g, se_g = mean_gain(rows)
    print(f"mean gain {g:.3f} ({g / se_g:.2f} SE of the mean)")
    assert g >= margin * se_g, "; ".join(lines)
    below = [r["seed"] for r in rows if r["gain"] < margin * r["se"]]
    assert not below, f"per-seed bar not met on seeds {below}: " + "; ".join(lines)


def session_dir(tmp_path_factory) -> Path:
    """A folder every item of this pytest session sees, xdist workers included: a worker's basetemp
    is <the controller's basetemp>/<worker id> (xdist's workermanage), so its parent is the
    session's own numbered folder; without xdist it is the basetemp itself."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def record_gain(shared: Path, name: str, row: dict) -> None:
    """Write one seed's row (gains()'s dict) to shared/name/seed<S>.json, atomically
    (arena.io.atomic: a sibling temp file renamed into place)."""
    from arena.io.atomic import atomic_write_json

    atomic_write_json(shared / name / f"seed{row['seed']}.json", row)


def mean_verdict_when_complete(shared: Path, name: str, seeds, *, min_effect: float):
    """compare() on the gains in points, d_s = 100 (p1_s - p0_s), once every seed's row is in
    shared/name; None while one is missing (its item is still running, failed, or was deselected)."""
    from arena.analysis.verdicts import compare

    rows = {}
    for seed in seeds:
        path = shared / name / f"seed{seed}.json"
        if not path.is_file():
            return None
        rows[seed] = json.loads(path.read_text())
    diffs = [100 * rows[s]["gain"] for s in seeds]
    result = compare(diffs, min_effect=min_effect)
    print(f"mean gain over seeds {list(seeds)}: {result.mean:+.1f} points [{result.low:+.1f}, {result.high:+.1f}], "
          f"p = {result.p:.4f}: {result.verdict} (gains {', '.join(f'{d:+.1f}' for d in diffs)})")
    return result


def assert_no_fall(rows: list[dict], *, margin: float) -> None:
    """No seed ends below its start by more than `margin` paired SE (summary.json's gain_paired_se)."""
    assert all(r["se_paired"] for r in rows), "a run without gain_paired_se (no eval_wins?)"
    fell = [r["seed"] for r in rows if r["gain"] < -margin * r["se_paired"]]
    assert not fell, f"seeds {fell} fell below their start by more than {margin} paired SE: {rows}"
