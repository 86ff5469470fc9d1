"""Orchestrator overhead per cell: `arena sweep` over N no-op cells (local launcher) against
Hydra multirun of the same no-op task (submitit_local launcher when hydra-submitit-launcher is
installed, else Hydra's basic sequential launcher; the output says which).

    overhead per cell = (wall time of the sweep - N * task time) / N     (task time = 0 here)

Ours = expand + validate the N cells, write the manifest, the BC stage job, and the cells on
the local launcher's worker pool; the report (the tables and figures, written once per
sweep) is timed on its own and printed beside it. Where the time went before the worker pool
(3.66 s/cell against Hydra's 1.26): one submitit job, i.e. two fresh python processes
(controller + task) importing torch, per cell, with cores // cpus of them at once, plus one
Hydra composition per arm (~0.2 s). Now each of the `parallel` workers starts once and claims
cell after cell from the ledger (arena/sweeps/pool.py, worker.py), the job no longer imports
torch itself (the train fn does, once per worker), Hydra composes once per env (compose.py),
and the driver polls every 20 ms while cells finish. What stays per sweep: the driver's imports
(arena.po imports torch, ~2 s), the BC stage job (~1 s), the workers' start.

Usage: python benchmarks/bench_sweep_overhead.py [n_cells=32]
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noop_train(cfg) -> int:
    from arena.runs import RunFolder
    from arena.runs.summary import build_summary

    # a complete summary.json (every field of arena.runs.layout.SUMMARY_FIELDS), else it proves nothing
    summary = build_summary(status="done", cell_id=cfg.out.rstrip("/").rsplit("/", 1)[-1], points=[(0, 0.0)],
                            history=[{"step": 0}], total_steps=0, theta=0.0025, min_points=1, n_eval=1,
                            wall_seconds=0.0)
    RunFolder(cfg.out).create().write_summary(summary)
    return 0


def noop_bc(cfg) -> str:
    return "noop"


def bench_arena(n: int, results: Path) -> tuple[float, float]:
    """(seconds to plan and run the N cells, seconds for the final report), as `arena sweep`."""
    from arena.sweeps.cli import _finish
    from arena.sweeps.sweep import build_plan, execute

    results.mkdir(parents=True, exist_ok=True)
    grid = results / "noop.yaml"
    grid.write_text("arms:\n" + "".join(f"  - {{name: a{i}, lr: {1e-4 * (i + 1)}}}\n" for i in range(n)))
    quiet = lambda *_: None  # noqa: E731
    t0 = time.time()
    plan, options = build_plan([f"grid={grid}", "seeds=1", f"results_dir={results}", "budget=smoke",
                                "launcher=local", "progress_s=1000"])
    outcome = execute(plan, options, train_fn=noop_train, bc_fn=noop_bc, log=quiet)
    t1 = time.time()
    assert _finish(plan, outcome, quiet) == 0
    return t1 - t0, time.time() - t1


def bench_hydra(n: int, work: Path) -> tuple[float, str]:
    launcher = "submitit_local" if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") else "basic"
    app = work / "noop_app.py"
    app.write_text(textwrap.dedent("""
        import hydra
        @hydra.main(version_base=None, config_path=None, config_name=None)
        def main(cfg):
            return 0
        if __name__ == "__main__":
            main()
    """))
    lrs = ",".join(str(1e-4 * (i + 1)) for i in range(n))
    cmd = [sys.executable, str(app), "--multirun", f"+lr={lrs}", f"hydra.sweep.dir={work / 'multirun'}"]
    if launcher != "basic":
        cmd.append(f"hydra/launcher={launcher}")
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"hydra multirun failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.time() - t0, launcher


def main(n: int = 32) -> None:
    os.environ.setdefault("ARENA_HEARTBEAT_S", "10")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        arena_s, report_s = bench_arena(n, tmp / "arena")
        hydra_s, launcher = bench_hydra(n, tmp)
    print(f"arena sweep (local launcher, worker pool): {arena_s:.2f} s total, {arena_s / n:.3f} s/cell "
          f"over {n} no-op cells (+ {report_s:.2f} s for the report, once per sweep)")
    print(f"hydra multirun ({launcher} launcher): {hydra_s:.2f} s total, {hydra_s / n:.3f} s/cell")
    if launcher == "basic":
        print("note: hydra-submitit-launcher is not installed; compared with Hydra's basic (in-process, "
              "sequential) launcher, which has no per-job process start, so it is a lower bound for Hydra")
    print(f"ratio arena/hydra: {arena_s / hydra_s:.2f} (target <= 0.33); "
          f"with the report: {(arena_s + report_s) / hydra_s:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
