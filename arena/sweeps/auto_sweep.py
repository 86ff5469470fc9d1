"""`arena sweep ... seeds=auto [max_seeds=N] [min_effect=P]`: the rounds on disk (the decision
is auto_seeds.py's, pure; docs/design.md, Sweep: seeds=auto).

The result files are the only state: each pass replays every look from round 1 on the cells'
summary.json files (auto_seeds.replay), so the same command after a kill, or a second time,
reaches the same rounds and the same decisions and runs only the cells not done. The manifest
lists the cells of the rounds so far, and records the settings and each arm's seeds and reason
under "auto_seeds" (the report judges the final data at that record's alpha).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from arena.runs.folder import RunFolder

from .auto_seeds import AutoSeeds, History, Pair, pairs_of, replay, seed_reasons
from .plan import Cell, SweepPlan, expand

POINTS = 100.0


def baseline_of(plan: SweepPlan) -> Optional[str]:
    """The arm the others are compared with: the report's default (the arm named grpo, else the
    first arm running preset grpo unchanged; arena.analysis.table_data.baseline_arm)."""
    # lazy: keeps pandas, scipy, torch out of this module's import
    from arena.analysis.table_data import baseline_arm

    rows = [c.manifest_row() for c in plan.worst_case]
    return baseline_arm({"grid": [a["name"] for a in plan.arms], "cells": rows})


def pairs(plan: SweepPlan) -> list[Pair]:
    """The comparisons seeds=auto stops on: the report's confirmatory families for this grid
    (arena.analysis.confirmatory.families_for), with the report's default baseline."""
    # lazy: keeps pandas, scipy, torch out of this module's import
    from arena.analysis.confirmatory import families_for

    return pairs_of(families_for(plan.dimension, [a["name"] for a in plan.arms], baseline_of(plan)))


def _scores(plan: SweepPlan, curves: bool = False) -> Callable[[str, int], Optional[dict[str, float]]]:
    """scores(arm, seed): {measure: points} (arena.analysis.measures: final; drop_from_best from the eval
    points of metrics.jsonl; collapsed from the status), each the mean over the sweep's envs of that
    seed's runs; None while one of those runs has not finished. A finished run without a score gives
    NaN (the verdict rule leaves that seed out). `curves`: read metrics.jsonl (drop_from_best needs it)."""
    by_key = {(c.arm, c.env, c.seed): c for c in plan.worst_case}

    def scores(arm: str, seed: int) -> Optional[dict[str, float]]:
        per_env = []
        for env in plan.envs:
            cell = by_key[(arm, env, seed)]
            run = RunFolder(cell.out, expect_cell_id=cell.cell_id)
            summary = run.summary()
            if summary is None:
                return None
            per_env.append(_measures(run, summary, curves))
        return {m: sum(v[m] for v in per_env) / len(per_env) for m in per_env[0]}

    return scores


def _measures(run: RunFolder, summary: dict, curves: bool) -> dict[str, float]:
    """One finished run's measures in points (docs/methods.md §14, Measures); drop_from_best is NaN
    unless `curves`."""
    final = _points(summary.get("final_eval_success"))
    start = _points(summary.get("initial_eval_success"))
    rows = run.read_metrics() if curves else []
    evals = [_points(row.get("eval/success_rate")) for row in rows if "eval/success_rate" in row]
    curve = [v for v in evals + [start, final] if math.isfinite(v)]
    best = max(curve) if evals and curve else math.nan
    fell = summary.get("status") == "collapsed" or summary.get("stable") is False  # measures.fell
    return {"final": final, "start": start, "drop_from_best": best - final, "collapsed": POINTS * fell}


def _points(value) -> float:
    try:
        return float(value) * POINTS if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def current_round(plan: SweepPlan) -> History:
    """The looks the results on disk allow, and the current round's seeds per arm."""
    compared = pairs(plan)
    curves = any(p.measure == "drop_from_best" for p in compared)
    return replay([a["name"] for a in plan.arms], compared, plan.auto, _scores(plan, curves))


def cells_of(plan: SweepPlan, counts: dict[str, int]) -> list[Cell]:
    """The report cells of every arm's seeds 0 .. counts[arm] - 1, in grid order."""
    keep = {(arm, s) for arm, n in counts.items() for s in range(n)}
    return [c for c in plan.worst_case if (c.arm, c.seed) in keep]


def prepare(plan: SweepPlan, auto: AutoSeeds) -> None:
    """Make `plan` a seeds=auto plan: the worst case (every arm at max_seeds) for the dry run
    and the score lookup, and as its cells the rounds the results on disk have reached."""
    plan.auto = auto
    plan.seeds = list(range(auto.max_seeds))
    plan.worst_case = expand(plan)
    _settle(plan, current_round(plan))


def _settle(plan: SweepPlan, history: History) -> None:
    plan.cells = cells_of(plan, history.counts)
    plan.seeds = list(range(max(history.counts.values())))
    families: dict[str, list[str]] = {}
    for p in pairs(plan):
        families.setdefault(p.family, []).append(p.name)
    plan.extra["auto_seeds"] = {**plan.auto.record(), "baseline": baseline_of(plan), "families": families,
                                "complete": history.complete, "arms": seed_reasons(history, plan.auto, pairs(plan))}


def look_line(history: History) -> str:
    """One progress line per look: each confirmatory comparison's verdict and who gets the next seed."""
    look = history.looks[-1]
    parts = [f"{name} {look.shown.get(name, c.verdict)} (n={c.n})" for name, c in look.comparisons.items()]
    nxt = f"next seed for {', '.join(look.grow)}" if look.grow else "every comparison resolved or at max_seeds: done"
    return f"[sweep] seeds=auto look {len(history.looks)}: " + "; ".join(parts) + f" -> {nxt}"


def run_rounds(plan: SweepPlan, run: Callable[[list[Cell]], dict[str, str]], *, log: Callable = print,
               bc_stage: Callable[[list[Cell]], None] = lambda cells: None) -> dict[str, str]:
    """Run round after round until every arm is resolved or at max_seeds, or a cell fails
    (the command then exits 1; rerunning it retries the failed cells and goes on). `bc_stage`
    trains the BC checkpoints a round's new seeds need before its cells run."""
    outcome: dict[str, str] = {}
    history = current_round(plan)
    while True:
        _settle(plan, history)
        plan.write_manifest()
        if history.complete:  # every cell of every round is done
            return {**{c.cell_id: "done" for c in plan.cells}, **outcome}
        bc_stage(plan.cells)
        result = run(plan.cells)  # the driver skips the cells that are done
        outcome.update(result)
        if any(state != "done" for state in result.values()):
            return outcome
        before, history = history, current_round(plan)
        if len(history.looks) == len(before.looks):  # every cell done, yet no new look: never loop
            raise RuntimeError(f"seeds=auto: the cells of round {len(before.looks) + 1} are done but their scores "
                               "could not be read")
        log(look_line(history))


def summary_lines(plan: SweepPlan) -> list[str]:
    """The end of a seeds=auto sweep: each arm's seeds and why."""
    record = plan.extra.get("auto_seeds") or {}
    families = "; ".join(f"{f}: {', '.join(names)}" for f, names in (record.get("families") or {}).items()) or "none"
    lines = [f"[sweep] seeds=auto (max_seeds={record.get('max_seeds')}, {record.get('looks')} looks, {record.get('bound')} "
             f"bound at family-wise alpha {record.get('alpha')}; families {families}; min_effect "
             f"{record.get('min_effect')} points):"]
    for arm, row in (record.get("arms") or {}).items():
        verdicts = ", ".join(f"{name} {v}" for name, v in row["verdicts"].items())
        lines.append(f"  {arm}: {row['seeds']} seeds, {row['reason']}" + (f" ({verdicts})" if verdicts else ""))
    return lines
