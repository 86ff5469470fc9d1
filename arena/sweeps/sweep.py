"""`arena sweep`: read the sweep's own keys (arena.config.verb_args.SweepArgs), expand and
validate every cell, write the manifest, run BC as its own stage, then run the missing cells
and print the table."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from arena.backends import backend_of
from arena.bc.key import bc_hash
from arena.config.launchers import launcher_config, launcher_names
from arena.config.verb_args import SweepArgs
from arena.config.verb_grammar import Parsed, last_value, own_fields, parse_args, parse_overrides
from arena.runs.folder import RunFolder
from arena.runs.layout import Results, check_name
from arena.runs.manifest import report_cells_on_disk, report_key
from arena.runs.run_log import COMMAND_ENV

from .auto_seeds import parse_auto
from .auto_sweep import prepare, run_rounds
from .driver_lock import sweep_driver_lock
from .grids import available_dimensions, load_grid_located, parse_envs, parse_seeds
from .plan import SweepPlan, expand, first_use_notices
from .run_overrides import check_run_overrides
from .search import search_then_report, validate_search
from .twins import code_identity, copy_finished_twins


@dataclass
class SweepOptions(SweepArgs):
    """The sweep's own keys (SweepArgs), checked, plus what only the driver adds."""
    parallel: int = 1  # jobs at once, BC stage and cells alike (sweep_parallelism of the launcher)


def budget_of(run: list[str]) -> str:
    """The budget a list of key=value overrides composes: the last `budget=` wins (the one
    precedence rule, arena.config.verb_grammar); none: "default". The one reader of it for the
    sweep's name and `arena search`'s."""
    return str(last_value(run, "budget", "default"))


def _results_dir(run: list[str]) -> Path:
    return Path(str(last_value(run, "results_dir", "results"))).resolve()


def _dimension(parsed: Parsed[SweepArgs], arms: Optional[list]) -> str:
    """The sweep's dimension: dimension= (a shipped or $ARENA_GRIDS grid), else grid=PATH's stem."""
    sweep, given = parsed.args, parsed.given
    if "dimension" in given:
        value = sweep.dimension
        if arms is None and "grid" not in given and (not isinstance(value, str) or not value):
            raise ValueError(f"dimension={value!r} is empty or not a name; valid: {', '.join(available_dimensions())}")
        if value not in (None, ""):
            return str(value)
    if sweep.grid in (None, ""):
        raise ValueError("needs dimension=NAME (or grid=PATH); valid dimensions: "
                         + ", ".join(available_dimensions()))
    return Path(str(sweep.grid)).stem


def _envs(parsed: Parsed[SweepArgs]):
    """The value of env= or of its other spelling envs= (`envs=[sokoban,household,shop]`), not both."""
    if "envs" not in parsed.given:
        return parsed.args.env
    if "env" in parsed.given:
        raise ValueError("give the environments once: env=[...] or envs=[...], not both")
    return parsed.args.envs


def _options(sweep: SweepArgs, launcher: str) -> SweepOptions:
    """timeout_min (null or an integer >= 1) and progress_s (> 0); fail_fast and dry_run are
    booleans already (arena.config.verb_grammar.parse_args)."""
    timeout = sweep.timeout_min
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1):
        raise ValueError(f"timeout_min={timeout!r}: valid: an integer >= 1 (minutes per cell), or unset")
    progress = sweep.progress_s
    if not isinstance(progress, (int, float)) or isinstance(progress, bool) or progress <= 0:
        raise ValueError(f"progress_s={progress!r}: valid: a number of seconds > 0")
    return SweepOptions(**{**asdict(sweep), "launcher": launcher, "progress_s": float(progress)},
                        parallel=sweep_parallelism(launcher))


def build_plan(args: list[str] | Parsed[SweepArgs], *, arms: Optional[list] = None) -> tuple[SweepPlan, SweepOptions]:
    """Everything a sweep needs, fully validated; raises ValueError naming the key (and the grid
    file and line) with the valid choices, before anything is written or launched.
    `args`: the command line, or it parsed (arena.config.verb_grammar.parse_args(SweepArgs, ...)).
    `arms` replaces the grid (used by `arena search`, whose `dimension` names the sweep)."""
    parsed = args if isinstance(args, Parsed) else parse_args(SweepArgs, args)
    sweep, run = parsed.args, list(parsed.overrides)
    envs = _envs(parsed)
    dimension = _dimension(parsed, arms)
    sources: list[str] = []
    if arms is None:
        arms, sources = load_grid_located(dimension if "grid" not in parsed.given else None, path=sweep.grid)
    # seed=, a key an arm sets, a typo (named among the sweep's keys too)
    check_run_overrides(run, arms, sources, dimension, [f.name for f in own_fields(SweepArgs)])
    launcher = str(sweep.launcher)
    if launcher not in launcher_names():
        raise ValueError(f"unknown launcher {launcher!r}; valid: {', '.join(launcher_names())}")
    options = _options(sweep, launcher)
    results_dir = _results_dir(run)
    run = [a for a, o in zip(run, parse_overrides(run)) if o.key_or_group != "results_dir"] + \
        [f"results_dir={results_dir}"]
    auto = parse_auto(sweep.seeds, sweep.max_seeds, sweep.min_effect)
    plan = SweepPlan(name="", dimension=dimension, results=Results(results_dir), arms=arms, envs=parse_envs(envs),
                     seeds=parse_seeds(sweep.seeds) if auto is None else list(range(auto.first)),
                     common=run, arm_sources=sources)
    # the name is a folder under results_dir: a safe name (no "..", no "/") or exit 2
    name = check_name("name", sweep.name or f"{dimension}-{budget_of(run)}")
    plan.name = name
    plan.cells = expand(plan)  # validates every cell via load_config
    if auto is not None:
        if plan.cells[0].cfg.search.enabled:
            raise ValueError("seeds=auto and search.enabled=true do not go together (the search picks each arm's "
                             "config first); valid: a fixed seeds=N with the search, or seeds=auto without it")
        prepare(plan, auto)  # the cells of the rounds the results on disk have reached
    # seeds=auto: a finished cell of a later round waits for its round (a lost earlier cell reruns first)
    hidden, plan.superseded = finished_cells_not_planned(plan, plan.worst_case if auto is not None else None)
    if hidden:
        raise ValueError(f"sweep {name!r} already holds {len(hidden)} finished run(s) that this command would leave out "
                         f"of its manifest, and so out of its report: {', '.join(hidden[:6])}"
                         f"{' ...' if len(hidden) > 6 else ''}; valid: another name=NAME for this sweep, or arms, "
                         f"envs and seeds that include them")
    if plan.cells[0].cfg.search.enabled:
        validate_search(plan)
    return plan, options


def finished_cells_not_planned(plan: SweepPlan, cells: Optional[list] = None) -> tuple[list[str], list[str]]:
    """The finished report cells of the sweep's manifest on disk that `plan` (or `cells`, when
    given: seeds=auto's worst case) does not plan: (left_out, superseded).
    left_out:   "arm/env/seed" that `plan` has no report cell for (a smaller or another grid,
                fewer seeds or envs, under the same name): rewriting the manifest would hide them
                from the report and from `arena status`.
    superseded: "arm/env/seed (cells/<old id>)" that `plan` runs under another cell id (another
                config: a steps, lr or hyperparameter override under the same name). The
                report shows the new config's cells; the old folders stay on disk.
    A manifest that is absent or unreadable hides nothing (it is rewritten)."""
    planned = {report_key(c.manifest_row()): c.cell_id for c in (plan.cells if cells is None else cells)
               if c.role == "report"}
    left_out, superseded = [], []
    for row in report_cells_on_disk(plan.results.root, plan.name) or []:
        key, cid = report_key(row), str(row["cell_id"])
        if planned.get(key) == cid or not RunFolder(plan.results.cell(plan.name, cid), expect_cell_id=cid).done:
            continue
        name = "/".join(map(str, key))
        if key in planned:
            superseded.append(f"{name} (cells/{cid})")
        else:
            left_out.append(name)
    return left_out, superseded


def superseded_note(plan: SweepPlan, superseded: list[str]) -> str:
    """The line a sweep prints when it replaces finished cells of another config (never quietly)."""
    shown = ", ".join(superseded[:4]) + (" ..." if len(superseded) > 4 else "")
    return (f"[sweep] note: {len(superseded)} finished run(s) of sweep {plan.name!r} ran another config of the same "
            f"arm/env/seed and are superseded by this command's cells: {shown}. Their folders stay in "
            f"{plan.results.cells(plan.name)}; the report will show this config's cells. To keep both, "
            f"use another name=NAME for this sweep.")


def bc_configs(cells) -> list:
    """One config per distinct BC checkpoint the cells need (a backend with a sweep BC stage,
    arena.backends.BACKENDS, and no model.path).
    The key is the BC checkpoint's own (arena.bc.key, torch-free: the driver
    does not import torch or transformers)."""
    seen, out = set(), []
    for cell in cells:
        if not backend_of(cell.cfg).sweep_bc_stage or cell.cfg.model.path:
            continue
        key = bc_hash(cell.cfg)
        if key not in seen:
            seen.add(key)
            out.append(cell.cfg)
    return out


def sweep_parallelism(launcher: str) -> int:
    """Jobs a sweep keeps running at once, BC stage and cells alike: the launcher's parallelism
    (launchers.job_parallelism), capped on the local launcher by $ARENA_MAX_PARALLEL."""
    # lazy: keeps submitit out of this module's import
    from .launchers import job_parallelism

    parallel = job_parallelism(launcher)
    if launcher_config(launcher)["kind"] == "local" and os.environ.get("ARENA_MAX_PARALLEL"):
        raw = os.environ["ARENA_MAX_PARALLEL"]
        try:
            cap = int(raw)
        except ValueError:
            cap = 0
        if cap < 1:
            raise ValueError(f"ARENA_MAX_PARALLEL={raw!r}: valid: an integer >= 1 (jobs at once)")
        parallel = min(parallel, cap)
    return parallel


def execute(plan: SweepPlan, options: SweepOptions, *, train_fn: Optional[Callable] = None,
            bc_fn: Optional[Callable] = None, log: Callable = print) -> dict[str, str]:
    """BC stage, then the report cells (after a search when search.enabled). {cell_id: outcome}."""
    with sweep_driver_lock(plan):  # writes the manifest; SweepBusy if another grid runs under this name
        return _execute_locked(plan, options, train_fn=train_fn, bc_fn=bc_fn, log=log)


def _execute_locked(plan: SweepPlan, options: SweepOptions, *, train_fn, bc_fn, log) -> dict[str, str]:
    # lazy: keeps submitit out of this module's import
    from .launchers import make_executor, remove_empty_template_folder, start_after
    from .runner import provenance_env, run_bc_stage, run_cells
    env = provenance_env()
    kind = launcher_config(options.launcher)["kind"]
    executor = make_executor(options.launcher, plan.results.jobs(plan.name), timeout_min=options.timeout_min)
    threads = int(launcher_config(options.launcher).get("cpus") or 1) if kind != "debug" else None
    parallel = options.parallel
    for notice in first_use_notices(plan.cells):  # e.g. household's large pool, generated inside a job
        log(f"[sweep] {notice}")
    staged: set[str] = set()

    def bc_stage(cells) -> None:
        """The BC checkpoints `cells` need that no earlier stage of this command trained or found
        (seeds=auto's later rounds bring new seeds, and so new checkpoints)."""
        bc_cfgs = [c for c in bc_configs(cells) if bc_hash(c) not in staged]
        staged.update(bc_hash(c) for c in bc_cfgs)
        if bc_cfgs:  # BC runs minutes before any cell starts: say so (each BC's result is logged when it ends)
            log(f"[sweep] BC stage: {len(bc_cfgs)} checkpoint(s) to train or find cached, at most {parallel} at once "
                f"(job logs: {plan.results.jobs(plan.name)})")
        bc_jobs = run_bc_stage(bc_cfgs, executor=executor, env=env, threads=threads, bc_fn=bc_fn,
                               wait=kind != "slurm", log=log, parallel=parallel)
        if kind == "slurm" and bc_jobs:
            start_after(executor, [j.job_id for j in bc_jobs])

    bc_stage(plan.cells)
    # local: `parallel` worker jobs, each running cell after cell (pool.py); else one job per cell
    pool_dir = plan.results.jobs(plan.name) / "pool" if kind == "local" else None
    identity = code_identity(env) if options.reuse else None

    def run(cells) -> dict[str, str]:
        if identity is not None:  # cells another sweep finished with the same config and code: copied, not trained
            copy_finished_twins(cells, plan.results, plan.name, identity, command=env[COMMAND_ENV], log=log)
        return run_cells(cells, executor=executor, parallel=parallel, env=env, threads=threads, train_fn=train_fn,
                         fail_fast=options.fail_fast, progress_s=options.progress_s, log=log, pool_dir=pool_dir)

    try:
        if plan.cells and plan.cells[0].cfg.search.enabled:
            return search_then_report(plan, run, log=log)
        if plan.auto is not None:
            return run_rounds(plan, run, log=log, bc_stage=bc_stage)
        return run(plan.cells)
    finally:
        remove_empty_template_folder(plan.results.jobs(plan.name))
