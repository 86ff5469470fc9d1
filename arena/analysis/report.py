"""`arena report name=NAME [results_dir=...] [baseline=ARM] [min_effect=POINTS] [allow_mixed=true] [wandb=true]`
or `arena report evals=true [results_dir=...]` (the §5.3 table of every `arena eval` run, docs/eval.md)
(docs/design.md, Report).

write_report reads the sweep's manifest (report cells only), builds the two frames, and writes
`<results_dir>/sweeps/NAME/report/`: table.md, table.tex, table.csv, figures/*.png|pdf and, with
wandb=True, wandb_dashboard.json (published only when WANDB_MODE=online). Mixed git SHAs among
the finished runs are refused (ValueError listing them) unless allow_mixed=True. `baseline` is
the arm every other arm is compared to (default GRPO); a name that is not an arm is a ValueError
listing the arms. `min_effect` (points, default verdicts.MIN_EFFECT) is the difference a "no
difference" verdict must rule out (arena/analysis/verdicts.py).
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from arena.cli_errors import print_bad_input
from arena.evaluation.table import write_eval_table
from arena.runs.atomic import atomic_write_text
from arena.runs.layout import Results

from .frames import runs_frame, tidy_frame
from .manifest import auto_seeds_section, chosen_hp, load_manifest
from .table_data import build_table
from . import verdicts
from .verdicts import MIN_EFFECT
from .tables import render_csv, render_latex, render_markdown

def check_git_shas(runs: pd.DataFrame, *, allow_mixed: bool = False) -> list[str]:
    """The distinct git SHAs of the finished runs; ValueError if more than one, or if their jobs
    recorded more than one code hash (the package files each job ran: arena.runs.provenance;
    e.g. the checkout edited mid-sweep under one commit), unless allowed."""
    shas = sorted({s for s in runs["git_sha"] if isinstance(s, str) and s})
    hashes = runs["code_hash"] if "code_hash" in runs else pd.Series(dtype=object)
    counts = hashes[hashes.map(lambda h: isinstance(h, str) and bool(h))].value_counts()
    if allow_mixed:
        return shas
    if len(shas) > 1:
        raise ValueError(f"runs come from mixed git SHAs: {', '.join(shas)}; rerun them at one commit or pass "
                         "allow_mixed=true")
    if len(counts) > 1:
        found = ", ".join(f"{h[:12]} ({n} run{'s' * (n != 1)})" for h, n in counts.items())
        raise ValueError(f"runs come from mixed code: their jobs ran different package files ({found}), "
                         f"under {'git SHA ' + shas[0] if shas else 'no git SHA'}; rerun them with one version of "
                         "the code or pass allow_mixed=true")
    return shas


def _table(results_dir: Path, name: str, *, allow_mixed: bool, baseline: Optional[str] = None,
           min_effect: float = MIN_EFFECT):
    manifest = load_manifest(results_dir, name)
    runs = runs_frame(results_dir, name)
    if runs.empty:
        raise ValueError(f"sweep {name!r}: the manifest has no cells with role 'report'")
    check_git_shas(runs, allow_mixed=allow_mixed)
    arms = list(dict.fromkeys(runs["arm"]))
    if baseline is not None and baseline not in arms:
        raise ValueError(f"baseline={baseline!r} is not an arm of sweep {name!r}; valid values: {', '.join(arms)}")
    chosen = {(a, e): chosen_hp(results_dir, name, a, e) for a, e in runs[["arm", "env"]].drop_duplicates().itertuples(index=False)}
    # a seeds=auto sweep is judged at its per-look level and its min_effect (the manifest's
    # auto_seeds record), which its rounds were decided on (docs/design.md, Sweep: seeds=auto)
    auto = manifest.get("auto_seeds") if isinstance(manifest.get("auto_seeds"), dict) else {}
    alpha = float(auto.get("alpha", verdicts.ALPHA))
    min_effect = float(auto.get("min_effect", min_effect)) if min_effect == MIN_EFFECT else min_effect
    cells, arm_rows = build_table(runs, manifest, chosen, baseline=baseline, min_effect=min_effect, alpha=alpha)
    return manifest, runs, cells, arm_rows


def print_summary_table(results_dir: str | Path, name: str, *, allow_mixed: bool = False,
                        baseline: Optional[str] = None, min_effect: float = MIN_EFFECT) -> str:
    """The markdown table text (what table.md holds), for the sweep CLI to print."""
    manifest, _, cells, arms = _table(Path(results_dir).resolve(), name, allow_mixed=allow_mixed, baseline=baseline,
                                      min_effect=min_effect)
    return _with_seeds(render_markdown(cells, arms, name=name), manifest)


def _with_seeds(markdown: str, manifest: dict) -> str:
    """The markdown, with a seeds=auto sweep's seeds per arm and why (manifest.auto_seeds_section)."""
    section = auto_seeds_section(manifest)
    return markdown if not section else markdown.rstrip("\n") + "\n\n" + section


def write_tables(cells: pd.DataFrame, arms: pd.DataFrame, out: Path, *, name: str, manifest: Optional[dict] = None) -> str:
    """table.md, table.tex and table.csv under `out`; returns the markdown."""
    markdown = _with_seeds(render_markdown(cells, arms, name=name), manifest or {})
    atomic_write_text(out / "table.md", markdown)
    atomic_write_text(out / "table.tex", render_latex(cells, arms, name=name))
    atomic_write_text(out / "table.csv", render_csv(cells, arms))
    return markdown


def write_report(results_dir: str | Path, name: str, *, allow_mixed: bool = False, wandb: bool = False,
                 figures: bool = True, baseline: Optional[str] = None, min_effect: float = MIN_EFFECT) -> Path:
    """Write the report folder and return its path."""
    from .figures import write_figures
    from .mechanisms import mechanism_table, render_mechanisms

    results_dir = Path(results_dir).resolve()
    manifest, runs, cells, arms = _table(results_dir, name, allow_mixed=allow_mixed, baseline=baseline,
                                         min_effect=min_effect)
    out = Results(results_dir).report(name)
    markdown = write_tables(cells, arms, out, name=name, manifest=manifest)
    tidy = tidy_frame(results_dir, name, runs=runs)
    arm_names = list(cells["arm"].unique())
    atomic_write_text(out / "mechanisms.md", render_mechanisms(mechanism_table(tidy, arm_names), name=name))
    if figures:
        write_figures(tidy, runs, out / "figures", arm_order=arm_names, baseline=cells["baseline"].iloc[0] or None)
    if wandb:
        from .wandb_dashboard import dashboard_spec, save_dashboard

        spec = dashboard_spec(manifest, table_markdown=markdown)
        atomic_write_text(out / "wandb_dashboard.json", json.dumps(spec, indent=2, sort_keys=True) + "\n")
        if os.environ.get("WANDB_MODE") == "online":
            try:
                print(f"[report] W&B dashboard: {save_dashboard(spec)}")
            except (RuntimeError, OSError) as exc:
                print(f"[report] W&B dashboard not saved: {exc}", file=sys.stderr)
        else:
            print(f"[report] W&B dashboard spec written to {out / 'wandb_dashboard.json'}; offline (set "
                  "WANDB_MODE=online to publish it)", file=sys.stderr)
    return out


def parse_min_effect(value: str) -> float:
    """min_effect=POINTS: a finite number of points > 0 (a difference on the 0-100 success scale)."""
    try:
        points = float(value)
    except ValueError:
        points = float("nan")
    if not (math.isfinite(points) and 0 < points <= 100):
        raise ValueError(f"min_effect={value!r}: expected a number of points in (0, 100], e.g. min_effect=5")
    return points


def main(argv: Sequence[str]) -> int:
    """`report name=NAME [results_dir=results] [baseline=ARM] [min_effect=POINTS] [allow_mixed=true] [wandb=true]`
    (the keys: arena.config.verb_args.ReportArgs); exit 0, or 2 on bad input."""
    from arena.config.verb_args import ReportArgs, parse_own_args, verb_keys

    try:
        parsed = parse_own_args(ReportArgs, argv)
        opts, given = parsed.args, parsed.given
        if opts.evals:  # the paper's §5.3 table of `arena eval` runs
            if given - {"evals", "results_dir"}:
                raise ValueError(f"evals=true takes only results_dir; got {', '.join(sorted(given - {'evals'}))}")
            results = Results(str(opts.results_dir))
            out = write_eval_table(results.root, results.eval_table)
            print(out.read_text())
            print(f"[report] written to {out}")
            return 0
        if opts.name is None:
            raise ValueError(f"name=NAME (or evals=true) is required; valid keys: {', '.join(verb_keys(ReportArgs))}")
        out = write_report(str(opts.results_dir), opts.name, allow_mixed=opts.allow_mixed, wandb=opts.wandb,
                           baseline=opts.baseline, min_effect=parse_min_effect(str(opts.min_effect)))
    except ValueError as exc:
        return print_bad_input("report", exc)
    print((out / "table.md").read_text())
    print((out / "mechanisms.md").read_text())
    print(f"[report] written to {out}")
    return 0
