"""`arena sweep ... dry_run=true` (or `--dry-run`): the plan, printed; nothing is written, no BC
or cell is launched. It shows every cell (arm x env x seed) with its resolved method, its
cell id and whether it is done already, the BC stages the sweep would run, the launcher and its
parallelism, and a rough wall-time estimate from the budget.

Estimate (a rough guide, not a promise):
    pace          = seconds per sampled episode: the median over finished cells of
                    wall_seconds / (steps x batch_envs x group_size) from their summary.json and
                    config.yaml, for the same (backend, env, device); this sweep's own finished
                    cells when it has any, else any sweep's under results_dir, else
                    SECONDS_PER_EPISODE
    cell_seconds  = steps * batch_envs * group_size * pace
    total_seconds = mean cell_seconds * ceil(cells not done / parallel jobs)
SECONDS_PER_EPISODE = 0.044: the main job when budget=default had 30 steps (of 8 x 8 episodes,
evals included, BC excluded) took ~85 s per cell on 2 one-thread local workers on 2 cores
(docs/testbed.md, Wall times: 834 s for 18 cells and the BC stage): 85 / 1920 = 0.044. The
budget now has 50 steps (3200 episodes: ~141 s per cell at this pace; configs/budget/default.yaml
predicts ~140 s). The constant before it, 0.08, came from one-job-at-a-time runs.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Callable, Optional

import yaml

from arena.runs.layout import CELLS_DIR, CONFIG_FILE, SUMMARY_FILE, SWEEPS_DIR

from .ledger import DONE, cell_state
from .plan import SweepPlan, first_use_notices

SECONDS_PER_EPISODE = 0.044


def episodes(cfg) -> float:
    # sampled episodes of a run = steps * batch_envs * group_size
    return float(cfg["steps"]) * float(cfg["batch_envs"]) * float(cfg["group_size"])


def pace_key(cfg) -> tuple:
    """Cells whose pace is comparable: same backend, environment and device."""
    return (cfg.get("backend"), (cfg.get("env") or {}).get("name"), cfg.get("device"))


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
        root = plan.sweep_dir.parent.parent / SWEEPS_DIR
        found = [p for p in (cell_pace(d) for d in sorted(root.glob(f"*/{CELLS_DIR}/*"))) if p is not None]
    paces: dict[tuple, list[float]] = {}
    for key, pace in found:
        paces.setdefault(key, []).append(pace)
    return paces


def cell_seconds(cfg, paces: Optional[dict] = None) -> tuple[float, int]:
    """(estimated seconds, finished cells the pace rests on; 0 = the constant) of one cell."""
    plain = {"steps": cfg.steps, "batch_envs": cfg.batch_envs, "group_size": cfg.group_size}
    measured = (paces or {}).get((cfg.backend, cfg.env.name, cfg.device), [])
    pace = statistics.median(measured) if measured else SECONDS_PER_EPISODE
    return episodes(plain) * pace, len(measured)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def plan_lines(plan: SweepPlan, options) -> list[str]:
    from .launchers import launcher_config
    from .sweep import bc_configs

    kind = launcher_config(options.launcher)["kind"]
    parallel = options.parallel
    states = [cell_state(c.out) for c in plan.cells]
    todo = [c for c, s in zip(plan.cells, states) if s != DONE]
    bc = bc_configs(plan.cells)
    lines = [f"[dry-run] sweep {plan.name} ({plan.dimension}): {len(plan.cells)} cells = {len(plan.arms)} arms x "
             f"{len(plan.envs)} envs x {len(plan.seeds)} seeds; {len(todo)} to run, {len(plan.cells) - len(todo)} done",
             f"[dry-run] folder: {plan.sweep_dir} ({'exists' if plan.sweep_dir.exists() else 'not created'})",
             f"[dry-run] launcher: {options.launcher} ({kind}), {parallel} job(s) at once"
             + (f", timeout {options.timeout_min} min per cell" if options.timeout_min else "")
             + (", fail_fast" if options.fail_fast else ""),
             f"[dry-run] BC stages: {len(bc)}" + "".join(f"\n  bc: env={c.env.name} seed={c.seed} steps={c.bc.steps} "
                                                        f"demos={c.bc.demos} source={c.bc.source}" for c in bc),
             f"  {'role':6s} {'arm':16s} {'env':10s} {'seed':>4s}  {'method':9s} {'steps':>5s}  {'cell_id':16s}  state"]
    for cell, state in zip(plan.cells, states):
        lines.append(f"  {cell.role:6s} {cell.arm:16s} {cell.env:10s} {cell.seed:>4d}  {cell.method:9s} "
                     f"{cell.cfg.steps:>5d}  {cell.cell_id}  {state}")
    if todo:
        paces = measured_paces(plan)
        estimates = [cell_seconds(c.cfg, paces) for c in todo]
        per_cell = sum(e[0] for e in estimates) / len(todo)
        total = per_cell * math.ceil(len(todo) / max(1, parallel))
        timed = max(e[1] for e in estimates)
        basis = (f"pace of {timed} finished cell(s) in {plan.sweep_dir.parent}" if timed else
                 f"no finished cell to time: {SECONDS_PER_EPISODE} s per episode, the main job's pace on 2 workers")
        lines.append(f"[dry-run] wall-time estimate: ~{_duration(per_cell)} per cell, ~{_duration(total)} for "
                     f"{len(todo)} cells on {parallel} job(s), BC not included ({basis})")
    lines.extend(f"[dry-run] {notice}" for notice in first_use_notices(plan.cells))
    if plan.cells and plan.cells[0].cfg.search.enabled:
        lines.append("[dry-run] search.enabled: search cells come first and are not listed (their points depend "
                     "on the search)")
    lines.append("[dry-run] nothing written, nothing launched")
    return lines


def print_plan(plan: SweepPlan, options, log: Callable = print) -> None:
    for line in plan_lines(plan, options):
        log(line)
