"""`arena sweep ... dry_run=true` (or `--dry-run`): the plan, printed; nothing is written, no BC
or cell is launched. It shows every cell (arm x env x seed) with its resolved method, its
cell id and whether it is done already, the BC stages the sweep would run, the launcher and its
parallelism, and a rough wall-time estimate from the budget.

Estimate (a rough guide, not a promise):
    cell_seconds  = steps * batch_envs * group_size * SECONDS_PER_EPISODE
    total_seconds = cell_seconds * ceil(cells not done / parallel jobs)
SECONDS_PER_EPISODE = 0.08 comes from the embedded Sokoban default budget on one core
(README: 2.6 min per cell for 30 steps of 8 x 8 episodes, evals included, BC excluded).
"""
from __future__ import annotations

import math
from typing import Callable

from .ledger import DONE, cell_state
from .plan import SweepPlan

SECONDS_PER_EPISODE = 0.08


def cell_seconds(cfg) -> float:
    # steps * batch_envs * group_size * SECONDS_PER_EPISODE
    return float(cfg.steps) * float(cfg.batch_envs) * float(cfg.group_size) * SECONDS_PER_EPISODE


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
             f"[dry-run] folder: {plan.sweep_dir} (not created)",
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
        per_cell = sum(cell_seconds(c.cfg) for c in todo) / len(todo)
        total = per_cell * math.ceil(len(todo) / max(1, parallel))
        lines.append(f"[dry-run] wall-time estimate: ~{_duration(per_cell)} per cell, ~{_duration(total)} for "
                     f"{len(todo)} cells on {parallel} job(s), BC not included (rough: embedded Sokoban pace)")
    if plan.cells and plan.cells[0].cfg.search.enabled:
        lines.append("[dry-run] search.enabled: search cells come first and are not listed (their points depend "
                     "on the search)")
    lines.append("[dry-run] nothing written, nothing launched")
    return lines


def print_plan(plan: SweepPlan, options, log: Callable = print) -> None:
    for line in plan_lines(plan, options):
        log(line)
