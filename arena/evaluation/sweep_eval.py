"""`arena eval sweep=NAME [n=1024] [seed=0] [results_dir=...] [other eval keys]`: the final
policy of every finished report cell of a sweep, evaluated on more held-out episodes than its
training evals played (docs/eval.md, Evaluating a sweep).

Each cell is one ordinary `arena eval` (runner.eval_main) with model.path = the cell's run folder
(its final policy, `<cell>/policy/`) and the cell's own environment: its env name, budget,
`env.kwargs.*`, `env.history_length`, `env.max_new_tokens` and `model.prompt_template`, read from
its config.yaml. So every eval has its own folder under `<results_dir>/evals/`, is cached and
resumed like any eval, and `arena report evals=true` lists it (label `<sweep>/<arm>/<env>/s<seed>`).

Then the arms are compared with the baseline on these evals, under the one verdict rule
(arena.analysis.verdicts.compare_family; docs/methods.md, Statistics): per seed s,
    d_s = mean over envs of (success_s(arm) - success_s(baseline))      (points)
on the seeds both arms finished. A cell that has not finished (no summary.json) is skipped and
said; a sweep with no finished cell exits 2.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Callable

from arena.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from arena.config.verb_args import EvalArgs
from arena.config.verb_grammar import Parsed
from arena.runs.layout import CONFIG_FILE, Results, SUMMARY_FILE
from arena.runs.manifest import read_manifest

from .options import eval_dir

POINTS = 100.0
CELL_ENV_KEYS = ("history_length", "max_new_tokens", "penalty_coef")  # env.* leaves an eval must share with the cell


def cell_eval_args(cell_folder: Path, label: str, shared: Parsed[EvalArgs]) -> Parsed[EvalArgs]:
    """The `arena eval` of the final policy of the run in `cell_folder` on its own environment
    (from its config.yaml), labelled `label`, with the keys `shared` by every cell (n, seed, ...;
    not sweep= nor min_effect=, which are the sweep's)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(cell_folder / CONFIG_FILE), resolve=True)
    env = cfg["env"]
    run = {"model.path": str(cell_folder), "env": env["name"], "budget": cfg["budget"],
           "model.prompt_template": cfg["model"]["prompt_template"]}
    run.update({f"env.{key}": env[key] for key in CELL_ENV_KEYS if key in env})
    run.update({f"env.kwargs.{key}": value for key, value in (env.get("kwargs") or {}).items()})
    return Parsed(replace(shared.args, label=label, sweep=None), (shared.given - {"sweep", "min_effect"}) | {"label"},
                  {**run, **shared.overrides})


def finished_cells(results_dir: str, name: str) -> tuple[list[dict], list[dict]]:
    """(finished report cells, unfinished ones) of sweep `name`, in manifest order; ValueError
    naming the sweeps that exist when there is no such sweep."""
    cells = [c for c in read_manifest(results_dir, name)["cells"] if c["role"] == "report"]
    done = [c for c in cells if (Results(results_dir).cell(name, c["cell_id"]) / SUMMARY_FILE).exists()]
    return done, [c for c in cells if c not in done]


def arm_comparison(success: dict[tuple[str, str, int], float], arms: list[str], baseline: str,
                   min_effect: float) -> list[str]:
    """Markdown rows: each arm vs the baseline on the paired seeds (module docstring), verdicts
    from compare_family (Holm over the arms)."""
    # lazy: keeps numpy, pandas, scipy, torch out of this module's import
    from arena.analysis.verdicts import compare_family

    envs = sorted({env for _, env, _ in success})
    seeds = sorted({seed for _, _, seed in success})

    def per_seed(arm: str) -> dict[int, float]:
        # mean over envs of one seed, only where the arm has every env
        return {s: sum(success[(arm, e, s)] for e in envs) / len(envs) for s in seeds
                if all((arm, e, s) in success for e in envs)}

    base = per_seed(baseline)
    diffs = {}
    for arm in arms:
        if arm != baseline:
            mine = per_seed(arm)
            diffs[arm] = [POINTS * (mine[s] - base[s]) for s in sorted(set(mine) & set(base))]
    family = compare_family(diffs, min_effect=min_effect) if diffs else {}
    rows = [f"| arm | seeds | {baseline} -> arm (points) | interval | verdict |", "| --- | --- | --- | --- | --- |"]
    for arm, c in family.items():
        finite = c.n >= 2 and math.isfinite(c.low) and math.isfinite(c.high)  # all-tied diffs: no t-interval
        interval = f"[{c.low:+.1f}, {c.high:+.1f}]" if finite else "-"
        extra = f" (about {c.seeds_needed} seeds would resolve {min_effect:g} points)" if c.seeds_needed else ""
        rows.append(f"| {arm} | {c.n} | {c.mean:+.1f} | {interval} | {c.verdict}{extra} |")
    return rows


def sweep_eval_main(parsed: Parsed[EvalArgs], log: Callable = print) -> int:
    """Evaluate every finished report cell of sweep `parsed.args.sweep` (module docstring)."""
    import sys

    # lazy: keeps httpx, numpy, pandas, scipy, tenacity, torch out of this module's import
    from arena.analysis.table_data import baseline_arm
    from .runner import eval_main

    name, results_dir = str(parsed.args.sweep), str(parsed.overrides.get("results_dir", "results"))
    min_effect = float(parsed.args.min_effect)
    for key in ("model.path", "env", "label", "out", "policy"):
        if key in parsed.given or key in parsed.overrides:
            print(f"arena eval: {key}= comes from each cell with sweep=NAME; valid with sweep=: n, seed, "
                  "results_dir, min_effect and the other eval keys (concurrency, chunk, eval.temperature, ...)",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        done, pending = finished_cells(results_dir, name)
        manifest = read_manifest(results_dir, name)
    except ValueError as exc:
        print(f"arena eval: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not done:
        print(f"arena eval: sweep {name!r} has no finished report cell yet (no summary.json); run or resume it "
              f"first: arena status name={name}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if pending:
        log(f"[eval] sweep {name}: {len(pending)} report cell(s) not finished, skipped: "
            + ", ".join(f"{c['arm']}/{c['env']}/s{c['seed']}" for c in pending))
    success, failed = {}, []
    for i, cell in enumerate(done, 1):
        arm, env, seed = cell["arm"], cell["env"], int(cell["seed"])
        label = f"{name}/{arm}/{env}/s{seed}"
        log(f"[eval] sweep {name}: cell {i}/{len(done)} {label}")
        folder = Results(results_dir).cell(name, cell["cell_id"])
        rc, summary = run_cell_eval(eval_main, cell_eval_args(folder, label, parsed), log)
        if rc != EXIT_OK:
            failed.append(label)
            if rc == EXIT_BAD_INPUT:
                return rc
            continue
        success[(arm, env, seed)] = summary["final_eval_success"]
    arms = [a for a in manifest["grid"] if any(k[0] == a for k in success)]
    baseline = baseline_arm(manifest)
    if baseline in arms and len(arms) > 1:
        log("\n".join(arm_comparison(success, arms, baseline, min_effect)))
    log(f"[eval] sweep {name}: {len(success)} cell eval(s) done; the table of every eval: "
        f"arena report evals=true results_dir={results_dir}")
    if failed:
        log(f"[eval] failed: {', '.join(failed)} (rerun the same command: finished episodes are cached)")
        return EXIT_FAILED
    return EXIT_OK


def run_cell_eval(eval_main: Callable, args: Parsed[EvalArgs], log: Callable) -> tuple[int, dict]:
    """(exit code, the eval's summary.json, {} unless it finished) of one cell's eval; the folder
    is the one eval_main wrote: options.eval_dir of the same keys."""
    # lazy: keeps httpx, numpy, tenacity, torch out of this module's import
    from .runner import prepare

    rc = eval_main(args, log)
    if rc != EXIT_OK:
        return rc, {}
    cfg, options = prepare(args)
    return rc, json.loads((eval_dir(cfg, options) / SUMMARY_FILE).read_text())
