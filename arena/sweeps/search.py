"""Stability-aware search, one per (arm, env), before the report cells (docs/design.md,
Stability criterion and collapse rules; docs/methods.md, Stability criterion and the search grid).

Each search is a generator that yields the cells of its next trial and receives their
outcomes; the driver runs the trials of every search together. An Optuna study (file-based
JournalStorage in `search/<arm>/<env>/`) records the trials. Points are enqueued
(`study.enqueue_trial`), and every trial is a ledger cell, so a resumed search finds finished
trials (or their finished cells) and evaluates no point twice.

    stable(point)      = every search seed's run is stable (summary.stable is True)
    instability(point) = max over seeds of var_last20 (inf when unresolved or failed)
    score(point)       = mean over seeds of final_eval_success
mode first: the first stable point in order; best: the highest score among stable points;
tpe: Optuna TPE over the point index, constraint = instability - theta <= 0.
No stable point: the least unstable point runs on the reporting seeds, flagged stable=false.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Generator

from arena.config import resolve_po
from arena.io.atomic import atomic_write_json
from arena.runs import RunFolder

from .grids import arm_overrides
from .plan import REPORT, SEARCH, Cell, SweepPlan, base_config, make_cell
from .search_space import arm_points, load_table

MODES = ("first", "best", "tpe")


def _evaluate(cells: list[Cell], theta: float) -> dict:
    summaries = [RunFolder(c.out, expect_cell_id=c.cell_id).summary() for c in cells]  # None unless a valid summary.json
    ok = all(s is not None for s in summaries)
    variances = [s.get("var_last20") if s else None for s in summaries]
    instability = max((math.inf if v is None else float(v)) for v in variances)
    return {"stable": ok and all(s.get("stable") is True for s in summaries),
            "score": sum(float(s["final_eval_success"] or 0.0) for s in summaries) / len(summaries) if ok else -math.inf,
            "instability": instability, "constraint": min(instability - theta, 1e9), "failed": not ok}


def _study(search_dir: Path, name: str):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search_dir.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(search_dir / "optuna.journal")))
    # optuna >= 5 reads the constraints set on each trial (Trial.set_constraint, in one_search) and
    # deprecates constraints_func (a FutureWarning even when passed as None in later versions):
    # it is passed only to an optuna without set_constraint, which reads the user attr instead.
    legacy = {} if hasattr(optuna.trial.Trial, "set_constraint") else {
        "constraints_func": lambda t: t.user_attrs.get("constraint", [1e9])}
    sampler = optuna.samplers.TPESampler(seed=0, **legacy)
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True)


def _trial_for(study, point: int, n_points: int):
    """A RUNNING trial of this point left by a killed search, or a new enqueued one."""
    import optuna

    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if t.params.get("point") == point:
            return optuna.trial.Trial(study, t._trial_id)
    study.enqueue_trial({"point": point})
    trial = study.ask()
    trial.suggest_categorical("point", list(range(n_points)))
    return trial


def search_points(plan: SweepPlan, arm: dict, env: str) -> tuple[list[dict], list[list[Cell]]]:
    """The arm's unique points (each validated via load_config) and their cells per search seed."""
    overrides = arm_overrides(arm)
    first = next(c for c in plan.cells if c.arm == arm["name"] and c.env == env)
    points, trial_cells, seen = [], [], set()
    for point in arm_points(resolve_po(first.cfg), load_table()):
        base = base_config(plan.common, {**overrides, **point}, env)
        cells = [make_cell(base, arm=arm["name"], env=env, seed=s, role=SEARCH, overrides={**overrides, **point},
                           name=plan.name, extra={"search_point": len(points)})
                 for s in first.cfg.search.seeds]
        if cells[0].cell_id not in seen:
            seen.add(cells[0].cell_id)
            points.append(point)
            trial_cells.append(cells)
    return points, trial_cells


def validate_search(plan: SweepPlan) -> None:
    """Before anything runs: the mode, disjoint seeds, and every point of every arm's table."""
    search = plan.cells[0].cfg.search
    if str(search.mode) not in MODES:
        raise ValueError(f"search.mode={search.mode!r}; valid: {', '.join(MODES)}")
    overlap = set(plan.seeds) & set(search.seeds)
    if overlap:
        raise ValueError(f"search.seeds must be disjoint from the reporting seeds; both hold {sorted(overlap)}")
    for arm in plan.arms:
        for env in plan.envs:
            search_points(plan, arm, env)


def one_search(plan: SweepPlan, arm: dict, env: str, log: Callable) -> Generator[list[Cell], None, dict]:
    import optuna

    first = next(c for c in plan.cells if c.arm == arm["name"] and c.env == env)
    search_cfg, theta = first.cfg.search, float(first.cfg.stability.theta)
    mode, seeds = str(search_cfg.mode), list(search_cfg.seeds)
    search_dir = plan.results.search(plan.name, arm["name"], env)
    chosen_file = plan.results.chosen(plan.name, arm["name"], env)
    if chosen_file.exists():
        return json.loads(chosen_file.read_text())
    points, trial_cells = search_points(plan, arm, env)
    study = _study(search_dir, f"{arm['name']}/{env}")
    finished = {t.params["point"]: t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,
                                                                        optuna.trial.TrialState.FAIL))}
    results: dict[int, dict] = {i: dict(t.user_attrs["result"]) for i, t in finished.items()}
    order = list(range(len(points)))
    # trials a killed search left RUNNING: their points are finished first, in the same trials
    stale = sorted({t.params["point"] for t in study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
                    if "point" in t.params} - set(results))
    budget = min(int(search_cfg.trials), len(points)) if mode == "tpe" else len(points)
    redraws = 0
    while len(results) < budget:
        if stale:
            point = stale.pop(0)
            trial = _trial_for(study, point, len(points))
        elif mode == "tpe" and results and redraws < 10 * budget:
            trial = study.ask()
            point = trial.suggest_categorical("point", order)
            if point in results:  # TPE drew a finished point: evaluate nothing, draw again
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                redraws += 1
                continue
        else:
            point = next(i for i in order if i not in results)
            trial = _trial_for(study, point, len(points))
        yield trial_cells[point]
        result = _evaluate(trial_cells[point], theta)
        trial.set_user_attr("result", result)
        trial.set_user_attr("constraint", [result["constraint"]])
        if hasattr(trial, "set_constraint"):
            trial.set_constraint("stability", result["constraint"])
        if result["failed"]:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, result["score"])
        results[point] = result
        log(f"[search] {arm['name']}/{env} point {point} {points[point] or '(preset)'}: "
            f"stable={result['stable']} score={result['score']:.3f}")
        if mode == "first" and result["stable"]:
            break
    stable = [i for i in results if results[i]["stable"]]
    if mode == "first" and stable:
        pick = min(stable)
    elif stable:
        pick = max(stable, key=lambda i: (results[i]["score"], -i))
    else:  # "no stable config": the least unstable point, flagged
        pick = min(results, key=lambda i: (results[i]["instability"], -results[i]["score"], i))
    chosen = {"arm": arm["name"], "env": env, "mode": mode, "point": pick, "overrides": points[pick],
              "stable": bool(stable), "result": results[pick], "search_seeds": seeds,
              "trials": {str(i): {"overrides": points[i], **results[i]} for i in sorted(results)}}
    atomic_write_json(chosen_file, chosen)
    return chosen


def search_then_report(plan: SweepPlan, run: Callable[[list[Cell]], dict], *, log: Callable = print) -> dict[str, str]:
    """Run every (arm, env) search in lockstep, then the chosen points on the reporting seeds."""
    active = {(a["name"], env): one_search(plan, a, env, log) for a in plan.arms for env in plan.envs}
    chosen: dict[tuple[str, str], dict] = {}
    outcome: dict[str, str] = {}
    search_cells: list[Cell] = []
    while active:
        batch = []
        for key, gen in list(active.items()):
            try:
                batch += next(gen)
            except StopIteration as stop:
                chosen[key] = stop.value
                del active[key]
        if batch:
            search_cells += [c for c in batch if c.cell_id not in {s.cell_id for s in search_cells}]
            plan.cells = [c for c in plan.cells if c.role == REPORT] + search_cells
            plan.write_manifest()
            outcome.update(run(batch))
    report = []
    arms = {a["name"]: a for a in plan.arms}
    for (arm, env), pick in chosen.items():
        overrides = {**arm_overrides(arms[arm]), **pick["overrides"]}
        base = base_config(plan.common, overrides, env)
        report += [make_cell(base, arm=arm, env=env, seed=s, role=REPORT, overrides=overrides,
                             name=plan.name, extra={"search_point": pick["point"], "search_stable": pick["stable"]})
                   for s in plan.seeds]
    plan.cells = report + search_cells
    plan.write_manifest()
    return {**outcome, **run(report)}
