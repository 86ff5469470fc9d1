"""Orchestrator overhead per cell: `arena sweep` over N no-op cells (local launcher) against
Hydra multirun of the same no-op task (submitit_local launcher when hydra-submitit-launcher is
installed, else Hydra's basic sequential launcher; the output says which).

    overhead per cell = (wall time of the sweep - N * task time) / N     (task time = 0 here)

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

    RunFolder(cfg.out).create().write_summary({"status": "done", "final_eval_success": 0.0, "stable": True})
    return 0


def noop_bc(cfg) -> str:
    return "noop"


def bench_arena(n: int, results: Path) -> float:
    from arena.sweeps.cli import sweep_main

    results.mkdir(parents=True, exist_ok=True)
    grid = results / "noop.yaml"
    grid.write_text("arms:\n" + "".join(f"  - {{name: a{i}, lr: {1e-4 * (i + 1)}}}\n" for i in range(n)))
    t0 = time.time()
    code = sweep_main([f"grid={grid}", "seeds=1", f"results_dir={results}", "budget=smoke", "launcher=local",
                       "progress_s=1000"], train_fn=noop_train, bc_fn=noop_bc, log=lambda *_: None)
    assert code == 0
    return time.time() - t0


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
    subprocess.run(cmd, check=True, cwd=work, capture_output=True)
    return time.time() - t0, launcher


def main(n: int = 32) -> None:
    os.environ.setdefault("ARENA_HEARTBEAT_S", "10")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        arena_s = bench_arena(n, tmp / "arena")
        hydra_s, launcher = bench_hydra(n, tmp)
    print(f"arena sweep (local launcher): {arena_s:.2f} s total, {arena_s / n:.3f} s/cell over {n} no-op cells")
    print(f"hydra multirun ({launcher} launcher): {hydra_s:.2f} s total, {hydra_s / n:.3f} s/cell")
    if launcher == "basic":
        print("note: hydra-submitit-launcher is not installed; compared with Hydra's basic (in-process, "
              "sequential) launcher, which has no per-job process start, so it is a lower bound for Hydra")
    print(f"ratio arena/hydra: {arena_s / hydra_s:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
