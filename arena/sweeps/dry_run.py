"""`arena sweep ... dry_run=true` (or `--dry-run`): the plan, printed; nothing is written, no BC
or cell is launched. It shows every cell (arm x env x seed) with its resolved method, its
cell id and whether it is done already (or would be copied from another sweep that finished
it: twins.py), the BC stages the sweep would run, the launcher and its
parallelism, and a rough wall-time estimate. A seeds=auto sweep shows its worst case: every arm
at max_seeds.

Estimate (a rough guide, not a promise):
    pace          = seconds per sampled episode: the median over finished cells of
                    wall_seconds / (steps x batch_envs x group_size) from their summary.json and
                    config.yaml, of the same (backend, env, budget, device) only (a smoke cell's
                    pace, mostly start-up, says nothing about budget=default); this sweep's own
                    finished cells when it has any, else any sweep's under results_dir, else the
                    env's calibrated SECONDS_PER_EPISODE (Sokoban's, said so, for an env without one)
    cell_seconds  = steps * batch_envs * group_size * pace
    cells         = mean cell_seconds * ceil(cells not done / parallel jobs)
    search        = (search.enabled) trials x search seeds per (arm, env), at cell_seconds each,
                    over the parallel jobs (the worst case: every point of mode first/best)
    BC stage      = each BC checkpoint not cached: the seconds its cached siblings of this plan
                    (other seeds, same env) took (bc.json), else bc.steps x the env's
                    BC_SECONDS_PER_STEP; over the parallel jobs
    total         = BC stage + search + cells
SECONDS_PER_EPISODE (budget=default, evals included, BC excluded; docs/testbed.md):
    sokoban   0.054: the main job (regime B, configs/env_budget/sokoban_default.yaml), ~172 s per
              cell of 50 steps x 8 x 8 on 2 one-thread workers (measured 167-214 s with 11 evals;
              5 fewer evals of ~2.5 s each at test_freq 10): 172 / 3200 = 0.054;
    household 0.139: run HR6, 712 s for 80 steps x 8 x 8 with evals of 256 games: 712 / 5120;
    shop      0.14:  the shop learning test, 40 RL steps x 8 x 8 with 13 evals of 512 goals
              in ~6 min (Wall times): 360 / 2560.
BC_SECONDS_PER_STEP (the band-stopped BC, demos and evals included, per step of its bc.steps cap):
    sokoban 58 s / 1500 = 0.039 (the wider model's band BC of the main job, 54-61 s measured);
    household 334 s / 1500 = 0.22 (run HB2); shop ~450 s / 2000 = 0.22 (the shop learning test's BC, ~7.5 min).
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Callable, Optional

import yaml

from arena.bc.key import bc_hash
from arena.config.launchers import launcher_config
from arena.runs.layout import CONFIG_FILE, SUMMARY_FILE, Results

from .ledger import DONE, cell_state
from .plan import SweepPlan, first_use_notices
from .search import search_points
from .twins import code_identity, twins_to_copy

SECONDS_PER_EPISODE = 0.054  # Sokoban's; the constant of an env without its own
ENV_SECONDS_PER_EPISODE = {"sokoban": SECONDS_PER_EPISODE, "household": 0.139, "shop": 0.14}
BC_SECONDS_PER_STEP = {"sokoban": 0.039, "household": 0.22, "shop": 0.22}


def episodes(cfg) -> float:
    # sampled episodes of a run = steps * batch_envs * group_size
    return float(cfg["steps"]) * float(cfg["batch_envs"]) * float(cfg["group_size"])


def pace_key(cfg) -> tuple:
    """Cells whose pace is comparable: same backend, environment, budget and device."""
    return (cfg.get("backend"), (cfg.get("env") or {}).get("name"), cfg.get("budget"), cfg.get("device"))


def cell_pace(cell_dir: Path) -> Optional[tuple[tuple, float]]:
    """(pace_key, seconds per sampled episode) of a finished cell, or None (unfinished, no
    wall time, unreadable files)."""
    try:
        summary = json.loads((cell_dir / SUMMARY_FILE).read_text())
        cfg = yaml.safe_load((cell_dir / CONFIG_FILE).read_text())
        steps, wall = int(summary["steps"]), float(summary["wall_seconds"])
        ran = {**cfg, "steps": steps}  # a collapsed run stops early: its logged steps
        if steps <= 0 or wall <= 0 or summary.get("status") not in ("done", "collapsed", "no_format"):
            return None
        return pace_key(cfg), wall / episodes(ran)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError):
        return None


def measured_paces(plan: SweepPlan) -> dict[tuple, list[float]]:
    """{pace_key: paces} of this sweep's finished cells, or when it has none, of every finished
    cell under results_dir/sweeps."""
    own = [cell_pace(c.out) for c in plan.cells]
    found = [p for p in own if p is not None]
    if not found:
        found = [p for p in (cell_pace(d) for d in plan.results.all_cells()) if p is not None]
    paces: dict[tuple, list[float]] = {}
    for key, pace in found:
        paces.setdefault(key, []).append(pace)
    return paces


def cell_seconds(cfg, paces: Optional[dict] = None) -> tuple[float, int]:
    """(estimated seconds, finished cells the pace rests on; 0 = the env's constant) of one cell."""
    plain = {"steps": cfg.steps, "batch_envs": cfg.batch_envs, "group_size": cfg.group_size}
    measured = (paces or {}).get((cfg.backend, cfg.env.name, cfg.budget, cfg.device), [])
    pace = statistics.median(measured) if measured else ENV_SECONDS_PER_EPISODE.get(cfg.env.name, SECONDS_PER_EPISODE)
    return episodes(plain) * pace, len(measured)


def bc_seconds(cfgs: list) -> tuple[float, int]:
    """(seconds of the BC stage's checkpoints not cached, summed, and how many of them): each
    from its cached siblings in `cfgs` (same env; bc.json's seconds), else the env's per-step
    constant x bc.steps."""
    took: dict[str, list[float]] = {}
    todo = []
    for cfg in cfgs:
        try:
            took.setdefault(cfg.env.name, []).append(float(json.loads(
                Results.of(cfg).bc_report(bc_hash(cfg)).read_text())["seconds"]))
        except (OSError, ValueError, KeyError, TypeError):
            todo.append(cfg)
    total = 0.0
    for cfg in todo:
        siblings = took.get(cfg.env.name)
        total += statistics.median(siblings) if siblings else \
            float(cfg.bc.steps) * BC_SECONDS_PER_STEP.get(cfg.env.name, BC_SECONDS_PER_STEP["sokoban"])
    return total, len(todo)


def search_cells(plan: SweepPlan) -> int:
    """Search cells at most (search.enabled): per (arm, env) the trials (tpe: min(trials, points);
    first/best: every point, the worst case) x the search seeds."""
    if not plan.cells or not plan.cells[0].cfg.search.enabled:
        return 0
    search = plan.cells[0].cfg.search
    n = 0
    for arm in plan.arms:
        for env in plan.envs:
            points = len(search_points(plan, arm, env)[0])
            n += (min(int(search.trials), points) if str(search.mode) == "tpe" else points) * len(search.seeds)
    return n


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def plan_lines(plan: SweepPlan, options) -> list[str]:
    # lazy: keeps numpy out of this module's import
    from .sweep import bc_configs

    kind = launcher_config(options.launcher)["kind"]
    parallel = options.parallel
    cells = plan.worst_case if plan.auto is not None else plan.cells
    states = [cell_state(c.out) for c in cells]
    if options.reuse:  # a cell that another sweep finished with the same config and code would be copied
        twins = {c.cell_id: twin for c, twin in twins_to_copy(cells, plan.results, plan.name, identity())}
        states = [COPY_OF + twins[c.cell_id].parent.parent.name if c.cell_id in twins else s
                  for c, s in zip(cells, states)]
    todo = [c for c, s in zip(cells, states) if s != DONE and not s.startswith(COPY_OF)]
    bc = bc_configs(cells)
    seeds = f"{len(plan.seeds)} seeds" if plan.auto is None else f"{plan.auto.max_seeds} seeds"
    copies = sum(s.startswith(COPY_OF) for s in states)
    lines = [f"[dry-run] sweep {plan.name} ({plan.dimension}): {len(cells)} cells = {len(plan.arms)} arms x "
             f"{len(plan.envs)} envs x {seeds}; {len(todo)} to run, {len(cells) - len(todo) - copies} done"
             + (f", {copies} to copy from other sweeps that finished them (reuse=false trains them)" if copies else "")]
    if plan.auto is not None:
        lines += auto_lines(plan, len(cells))
    lines += [f"[dry-run] folder: {plan.sweep_dir} ({'exists' if plan.sweep_dir.exists() else 'not created'})",
              f"[dry-run] launcher: {options.launcher} ({kind}), {parallel} job(s) at once"
              + (f", timeout {options.timeout_min} min per cell" if options.timeout_min else "")
              + (", fail_fast" if options.fail_fast else ""),
              f"[dry-run] BC stages: {len(bc)}" + "".join(f"\n  bc: env={c.env.name} seed={c.seed} steps={c.bc.steps} "
                                                         f"demos={c.bc.demos} source={c.bc.source}" for c in bc),
              f"  {'role':6s} {'arm':16s} {'env':10s} {'seed':>4s}  {'method':9s} {'steps':>5s}  {'cell_id':16s}  state"]
    for cell, state in zip(cells, states):
        lines.append(f"  {cell.role:6s} {cell.arm:16s} {cell.env:10s} {cell.seed:>4d}  {cell.method:9s} "
                     f"{cell.cfg.steps:>5d}  {cell.cell_id}  {state}")
    if todo:
        lines.append(estimate_line(plan, todo, bc, parallel))
    lines.extend(f"[dry-run] {notice}" for notice in first_use_notices(cells))
    if plan.cells and plan.cells[0].cfg.search.enabled:
        lines.append("[dry-run] search.enabled: search cells come first and are not listed (their points depend "
                     "on the search)")
    lines.append("[dry-run] nothing written, nothing launched")
    return lines


COPY_OF = "copy of "


def identity() -> dict:
    """This driver's code identity (twins.code_identity): its git state, versions and test hooks."""
    # lazy: keeps submitit out of this module's import
    from .runner import provenance_env
    return code_identity(provenance_env())


def auto_lines(plan: SweepPlan, worst: int) -> list[str]:
    """What seeds=auto will do, and where the results on disk have brought it."""
    auto = plan.auto
    reached = ", ".join(f"{arm} {row['seeds']}" for arm, row in plan.extra["auto_seeds"]["arms"].items())
    return [f"[dry-run] seeds=auto: {auto.first} seeds per arm first, then one more per round to each unresolved arm, "
            f"up to max_seeds={auto.max_seeds}; the confirmatory families judged at each of {auto.looks} looks under "
            f"{auto.bound.describe()}; min_effect {auto.min_effect:g} points",
            f"[dry-run] seeds=auto worst case: {worst} cells = {len(plan.arms)} arms x {len(plan.envs)} envs x "
            f"{auto.max_seeds} seeds (listed and estimated below); the results on disk have reached: {reached}"]


def estimate_line(plan: SweepPlan, todo: list, bc: list, parallel: int) -> str:
    """The wall-time estimate (module docstring): BC stage + search + cells, over the parallel jobs."""
    jobs = max(1, parallel)
    paces = measured_paces(plan)
    estimates = [cell_seconds(c.cfg, paces) for c in todo]
    per_cell = sum(e[0] for e in estimates) / len(todo)
    cells_total = per_cell * math.ceil(len(todo) / jobs)
    bc_total, bc_todo = bc_seconds(bc)
    bc_wall = bc_total / max(1, min(jobs, bc_todo))
    n_search = search_cells(plan)
    search_wall = per_cell * math.ceil(n_search / jobs)
    timed = max(e[1] for e in estimates)
    envs = sorted({c.cfg.env.name for c in todo})
    if timed:
        basis = f"pace of {timed} finished cell(s) of this budget in {plan.results.sweeps}"
    else:
        basis = "no finished cell to time (of this budget and env): " + ", ".join(
            f"{e}'s pace {ENV_SECONDS_PER_EPISODE[e]} s per episode" if e in ENV_SECONDS_PER_EPISODE else
            f"{e}: no calibrated pace, Sokoban's {SECONDS_PER_EPISODE} s per episode (a guess)" for e in envs)
    search = f" + search ~{_duration(search_wall)} (up to {n_search} cells)" if n_search else ""
    return (f"[dry-run] wall-time estimate: ~{_duration(per_cell)} per cell, ~{_duration(cells_total)} for "
            f"{len(todo)} cells on {parallel} job(s); BC stage ~{_duration(bc_wall)} ({bc_todo} of {len(bc)} "
            f"checkpoint(s) to train){search}; total ~{_duration(bc_wall + search_wall + cells_total)} ({basis})")


def print_plan(plan: SweepPlan, options, log: Callable = print) -> None:
    for line in plan_lines(plan, options):
        log(line)
