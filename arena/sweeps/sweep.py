"""`arena sweep`: parse the sweep's own keys, expand and validate every cell, write the
manifest, run BC as its own stage, then run the missing cells and print the table."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import yaml

from .grids import load_grid, parse_envs, parse_seeds
from .plan import SweepPlan, expand

# Keys the sweep consumes itself; everything else is a run override passed to every cell.
SWEEP_KEYS = ("dimension", "grid", "env", "seeds", "launcher", "fail_fast", "name", "timeout_min", "progress_s")
RUN_ENV_DEFAULT = "sokoban"


@dataclass
class SweepOptions:
    launcher: str = "local"
    fail_fast: bool = False
    timeout_min: Optional[int] = None
    progress_s: float = 30.0


def split_args(args: list[str]) -> tuple[dict, list[str]]:
    """`key=value` args -> (the sweep's keys parsed as YAML, the raw run overrides)."""
    sweep, run = {}, []
    for arg in args:
        if "=" not in arg:
            raise ValueError(f"expected key=value, got {arg!r} (e.g. dimension=is_clipping seeds=3)")
        key, _, raw = arg.partition("=")
        if key in SWEEP_KEYS:
            sweep[key] = yaml.safe_load(raw) if raw else ""
        else:
            run.append(arg)
    return sweep, run


def _budget(run: list[str]) -> str:
    budgets = [a.partition("=")[2] for a in run if a.startswith("budget=")]
    return budgets[-1] if budgets else "default"


def _results_dir(run: list[str]) -> Path:
    dirs = [a.partition("=")[2] for a in run if a.startswith("results_dir=")]
    return Path(dirs[-1] if dirs else "results").resolve()


def build_plan(args: list[str], *, arms: Optional[list] = None) -> tuple[SweepPlan, SweepOptions]:
    """Everything a sweep needs, fully validated; raises ValueError listing valid choices.
    `arms` replaces the grid (used by `arena search`, whose `dimension` names the sweep)."""
    from .launchers import launcher_names

    sweep, run = split_args(args)
    if arms is not None:
        sweep.setdefault("grid", None)
    elif "dimension" not in sweep and "grid" not in sweep:
        raise ValueError("arena sweep needs dimension=NAME (or grid=PATH); valid dimensions: "
                         + ", ".join(__import__("arena.sweeps.grids", fromlist=["x"]).available_dimensions()))
    dimension = str(sweep.get("dimension") or Path(str(sweep["grid"])).stem)
    if arms is None:
        arms = load_grid(dimension if "grid" not in sweep else None, path=sweep.get("grid"))
    launcher = str(sweep.get("launcher", "local"))
    if launcher not in launcher_names():
        raise ValueError(f"unknown launcher {launcher!r}; valid: {', '.join(launcher_names())}")
    results_dir = _results_dir(run)
    run = [a for a in run if not a.startswith("results_dir=")] + [f"results_dir={results_dir}"]
    name = str(sweep.get("name") or f"{dimension}-{_budget(run)}")
    plan = SweepPlan(name=name, dimension=dimension, sweep_dir=results_dir / "sweeps" / name, arms=arms,
                     envs=parse_envs(sweep.get("env", RUN_ENV_DEFAULT)), seeds=parse_seeds(sweep.get("seeds", 3)),
                     common=run)
    plan.cells = expand(plan)  # validates every cell via load_config
    if plan.cells[0].cfg.search.enabled:
        from .search import validate_search

        validate_search(plan)
    fail_fast = sweep.get("fail_fast", False)
    if not isinstance(fail_fast, bool):
        raise ValueError(f"fail_fast must be true or false; got {fail_fast!r}")
    options = SweepOptions(launcher=launcher, fail_fast=fail_fast, timeout_min=sweep.get("timeout_min"),
                           progress_s=float(sweep.get("progress_s", 30.0)))
    return plan, options


def bc_configs(cells) -> list:
    """One config per distinct BC checkpoint the cells need (embedded backend, no model.path).
    The key holds the inputs of arena.backends.embedded.bc.bc_hash (env, model, bc.*), without
    importing the backend (torch, transformers) into the driver."""
    from arena.config import to_plain

    seen, out = set(), []
    for cell in cells:
        if cell.cfg.backend != "embedded" or cell.cfg.model.path:
            continue
        env = cell.cfg.env
        key = repr((env.name, to_plain(env.kwargs), env.history_length, to_plain(cell.cfg.model), to_plain(cell.cfg.bc)))
        if key not in seen:
            seen.add(key)
            out.append(cell.cfg)
    return out


def execute(plan: SweepPlan, options: SweepOptions, *, train_fn: Optional[Callable] = None,
            bc_fn: Optional[Callable] = None, log: Callable = print) -> dict[str, str]:
    """BC stage, then the report cells (after a search when search.enabled). {cell_id: outcome}."""
    from .launchers import job_parallelism, launcher_config, make_executor
    from .runner import provenance_env, run_bc_stage, run_cells

    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    plan.write_manifest()
    env = provenance_env()
    kind = launcher_config(options.launcher)["kind"]
    executor = make_executor(options.launcher, plan.sweep_dir / "jobs", timeout_min=options.timeout_min)
    threads = int(launcher_config(options.launcher).get("cpus") or 1) if kind != "debug" else None
    parallel = job_parallelism(options.launcher)
    if kind == "local":
        parallel = max(1, min(parallel, int(os.environ.get("ARENA_MAX_PARALLEL", parallel))))
    bc_jobs = run_bc_stage(bc_configs(plan.cells), executor=executor, env=env, threads=threads, bc_fn=bc_fn,
                           wait=kind != "slurm", log=log)
    if kind == "slurm" and bc_jobs:
        from .runner import _after

        _after(executor, [j.job_id for j in bc_jobs])
    # local: `parallel` worker jobs, each running cell after cell (pool.py); else one job per cell
    pool_dir = plan.sweep_dir / "jobs" / "pool" if kind == "local" else None
    run = lambda cells: run_cells(cells, executor=executor, parallel=parallel, env=env, threads=threads,  # noqa: E731
                                  train_fn=train_fn, fail_fast=options.fail_fast, progress_s=options.progress_s, log=log,
                                  pool_dir=pool_dir)
    if plan.cells and plan.cells[0].cfg.search.enabled:
        from .search import search_then_report

        return search_then_report(plan, run, log=log)
    return run(plan.cells)
