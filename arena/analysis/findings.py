"""`arena findings`: the paper's findings (arena/analysis/findings.yaml) tested on the runs of a results
dir or of committed run tables (docs/testbed.md, "Findings table"; docs/design.md, Report).

Input: one row per run, the columns of the report's runs table (arena.analysis.frames.runs_frame, or
the `<name>_runs.csv` files of arena.analysis.tidy_csv): sweep, arm, env, seed, final_eval_success,
initial_eval_success, status, stable, budget, git_sha; optional recorded_in (the commit whose docs
recorded a run whose commit is not known), command and source (where a transcribed row came from),
config_hash and config_overrides (arena.analysis.frames: the hash of the settings the sweep's cells
share, and the arm's override keys it leaves out). A row whose config_hash is not today's for its
budget and env is labelled `<budget>@<hash>`: a former default is not today's. A `csv=` table is
checked first (run_tables.check_run_table): successes in [0, 1], integer seeds, known statuses, no score
on a failed or missing row, one row per (sweep, arm, env, seed); a bad row is a ValueError naming
the file and line (exit 2).

For each comparison `arm - baseline` of each finding and each sweep that holds both arms: the paired
per-seed differences of the final eval success (points; the mean over environments of seed s), under
the one verdict rule (arena.analysis.verdicts.compare_family: paired t, Holm across the comparisons of
one finding in one sweep; a comparison with one seed is untested and not counted in the family; a
seeds=auto sweep of a results dir under the group-sequential bound it stopped on: `sweep_levels`). For
each arm of each sweep: its gain over its own step-0 eval (Holm across the sweep's arms). A comparison that no sweep holds says which command makes it.

The verb's core: the rows and `main`. Its parts: the claims (claims.py), the input (run_tables.py), the
comparison with the paper (paper_compare.py), the text and its markdown and CSV (findings_render.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from arena.cli_errors import BadInput
from arena.config.verb_args import FindingsArgs
from arena.config.verb_grammar import parse_own_args
from arena.io.atomic import atomic_write_text
from arena.runs.layout import Results

from . import measures, verdicts
from .claims import Claim, load_claims
from .collapse_rule import counts_text, guarded
from .findings_render import commit_text, display, fell_text, render_csv, render_markdown, seeds_text, stability_text
from .paper_compare import paper_columns
from .manifest import load_manifest
from .run_tables import read_results_dir, read_run_tables
from .sequential import judging_level


def per_seed(runs: pd.DataFrame, arm: str, value: str = "final_eval_success") -> pd.Series:
    """An arm's value per seed in points: the mean over its environments (NaN runs left out)."""
    rows = runs[(runs["arm"] == arm) & runs[value].notna()]
    return (100.0 * rows.groupby("seed")[value].mean()).sort_index()


def paired_differences(runs: pd.DataFrame, arm: str, baseline: str, value: str = "final_eval_success") -> pd.Series:
    """d_s = arm - baseline on each seed both have (points), seeds in order.
    Per env e and seed s: d_{s,e} = 100 (x_arm - x_base), x the `value` column (a measure's column,
    measures.column); d_s = mean_e d_{s,e} over the envs both arms have a value for on that seed."""
    a = runs[runs["arm"] == arm].set_index(["seed", "env"])[value]
    b = runs[runs["arm"] == baseline].set_index(["seed", "env"])[value]
    d = (100.0 * (a - b)).dropna()  # [(seed, env) pairs both have]
    return d.groupby(level="seed").mean().sort_index()


def gains(runs: pd.DataFrame, arm: str) -> pd.Series:
    """g_s = final - step-0 eval of the arm's own run on seed s (points; mean over envs)."""
    rows = runs[runs["arm"] == arm]
    g = (100.0 * (rows["final_eval_success"] - rows["initial_eval_success"])).groupby(rows["seed"]).mean()
    return g.dropna().sort_index()



def _comparison_columns(d: pd.Series, c: "verdicts.Comparison") -> dict:
    """The statistics of one comparison, as findings.csv holds them."""
    return {"seeds": seeds_text(d.index), "n": c.n, "per_seed": " / ".join(f"{v:+.1f}" for v in d),
            "mean": c.mean, "low": c.low, "high": c.high, "p": c.p, "p_adjusted": c.p_adjusted, "mde": c.mde,
            "verdict": c.verdict, "seeds_needed": c.seeds_needed, "note": c.note}



def _sweep_columns(rows: pd.DataFrame) -> dict:
    """Where the runs came from: sweep, budget, commit, command."""
    return {"sweep": rows["sweep"].iloc[0], "budget": ", ".join(sorted({b for b in rows["budget"] if b})) or "-",
            "commit": commit_text(rows), "command": next((c for c in rows["command"] if c), "")}


def _missing_row(claim: Claim) -> dict:
    """A comparison that no sweep holds: the command that makes it."""
    return {"kind": "finding", "finding": claim.finding, "comparison": f"{display(claim.arm)} - {display(claim.baseline)}",
            "measure": claim.measure, "paper": claim.paper, "cite": claim.cite, "sweep": "-", "verdict": "no sweep",
            "command": f"arena sweep dimension={claim.dimension}"}


def _collapse_columns(rows: pd.DataFrame, claim: Claim, seeds, verdict: str) -> dict:
    """The collapse counts beside the verdict and the collapse-regime rule (collapse_rule.guarded): rows
    are one sweep's runs; counts over the arm's and the baseline's runs on the paired seeds."""
    arm, base = (rows[(rows["arm"] == a) & rows["seed"].isin(list(seeds))] for a in (claim.arm, claim.baseline))
    n_arm, n_base = measures.collapsed_runs(arm), measures.collapsed_runs(base)
    shown, confirmed = guarded(verdict, n_arm + n_base > 0, measures.collapsed_runs(rows) > 0)
    return {"verdict": shown, "confirmed": confirmed, "collapsed": counts_text(n_arm, len(arm), n_base, len(base))}


def finding_rows(runs: pd.DataFrame, claims: Sequence[Claim], *, min_effect: float = verdicts.MIN_EFFECT,
                 levels: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per (comparison, sweep holding both arms); a comparison no sweep holds gets one row
    naming its command. Holm runs across the comparisons of one finding within one sweep, each on the
    finding's measure (measures.py; runs without the measure columns get them from the runs alone).
    `levels`: {sweep: compare_family's keywords} for the seeds=auto sweeps (sequential.judging_level):
    such a sweep stopped on its verdicts, so they hold only under its group-sequential bound."""
    levels = levels or {}
    if any(measures.column(c.measure) not in runs for c in claims):
        runs = measures.add_measures(runs)
    out = []
    for finding in dict.fromkeys(c.finding for c in claims):
        members = [c for c in claims if c.finding == finding]
        for sweep, rows in runs.groupby("sweep", sort=True):
            # keyed by position: one finding may compare an arm with two baselines, or on two measures
            diffs = {i: paired_differences(rows, c.arm, c.baseline, measures.column(c.measure)) for i, c in enumerate(members)}
            held = {i: d for i, d in diffs.items() if len(d)}
            family = verdicts.compare_family(held, min_effect=min_effect, **levels.get(sweep, {})) if held else {}
            for i, c in enumerate(members):
                if i not in family:
                    continue
                pair = rows[rows["arm"].isin([c.arm, c.baseline])]
                collapse = _collapse_columns(rows, c, held[i].index, family[i].verdict)
                out.append({"kind": "finding", "finding": finding, "comparison": f"{display(c.arm)} - {display(c.baseline)}",
                            "measure": c.measure, "paper": c.paper, "cite": c.cite, **_sweep_columns(pair),
                            **_comparison_columns(held[i], family[i]), **collapse,
                            **paper_columns(c, family[i], collapse["confirmed"]),
                            "stable": f"{stability_text(rows[rows['arm'] == c.arm])} / "
                                      f"{stability_text(rows[rows['arm'] == c.baseline])}",
                            "fell": f"{fell_text(rows[rows['arm'] == c.arm])} / {fell_text(rows[rows['arm'] == c.baseline])}"})
        done = {r["comparison"] for r in out if r["finding"] == finding}
        out += [_missing_row(c) for c in members if f"{display(c.arm)} - {display(c.baseline)}" not in done]
    return pd.DataFrame(out)


def gain_rows(runs: pd.DataFrame, *, min_effect: float = verdicts.MIN_EFFECT) -> pd.DataFrame:
    """One row per (sweep, arm): its gain over its step-0 eval, Holm across the sweep's arms."""
    out = []
    for sweep, rows in runs.groupby("sweep", sort=True):
        arms = list(dict.fromkeys(rows["arm"]))
        g = {arm: gains(rows, arm) for arm in arms}
        held = {arm: s for arm, s in g.items() if len(s)}
        family = verdicts.compare_family(held, min_effect=min_effect) if held else {}
        for arm in held:
            arm_rows = rows[rows["arm"] == arm]
            out.append({"kind": "gain", "comparison": f"{display(arm)} - start", **_sweep_columns(arm_rows),
                        **_comparison_columns(held[arm], family[arm]), "stable": stability_text(arm_rows)})
    return pd.DataFrame(out)



def build(runs: pd.DataFrame, *, min_effect: float = verdicts.MIN_EFFECT,
          levels: dict[str, dict] | None = None) -> tuple[str, str]:
    """(markdown, csv) of the findings of a runs table (`levels`: finding_rows')."""
    findings = finding_rows(runs, load_claims(), min_effect=min_effect, levels=levels)
    gain = gain_rows(runs, min_effect=min_effect)
    markdown = render_markdown(runs, findings, gain, min_effect=min_effect, levels=levels)
    return markdown, render_csv(findings, gain)


def sweep_levels(results_dir: str | Path) -> dict[str, dict]:
    """{sweep: compare_family's keywords} for the sweeps of a results dir that ran seeds=auto (their
    manifests' auto_seeds record; sequential.judging_level), as `arena report` judges them."""
    out = {}
    for path in Results(results_dir).sweep_manifests():
        level = judging_level(load_manifest(results_dir, path.parent.name).get("auto_seeds"))
        if level:
            out[path.parent.name] = level
    return out


def main(args: Sequence[str]) -> int:
    """`arena findings [results_dir=DIR | csv=PATH] [out=DIR] [min_effect=POINTS]` (the keys:
    arena.config.verb_args.FindingsArgs): print the findings table (markdown); with out=DIR also
    write DIR/findings.md and DIR/findings.csv. Bad input raises BadInput (exit 2)."""
    try:
        parsed = parse_own_args(FindingsArgs, args)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    opts = parsed.args
    if "csv" in parsed.given and "results_dir" in parsed.given:
        raise BadInput("give results_dir= (run folders) or csv= (committed run tables), not both")
    try:
        min_effect = float(opts.min_effect)
    except (TypeError, ValueError):
        raise BadInput(f"min_effect={opts.min_effect!r}: valid: a number of points > 0") from None
    if not min_effect > 0:
        raise BadInput(f"min_effect={min_effect:g}: valid: a number of points > 0")
    try:
        runs = read_run_tables(str(opts.csv)) if opts.csv is not None else read_results_dir(str(opts.results_dir))
        levels = sweep_levels(str(opts.results_dir)) if opts.csv is None else {}
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise BadInput(str(exc)) from exc
    markdown, csv_text = build(runs, min_effect=min_effect, levels=levels)
    print(markdown, end="")
    if opts.out is not None:
        out = Path(str(opts.out))
        atomic_write_text(out / "findings.md", markdown)
        atomic_write_text(out / "findings.csv", csv_text)
        print(f"[findings] wrote {out / 'findings.md'} and {out / 'findings.csv'}")
    return 0
