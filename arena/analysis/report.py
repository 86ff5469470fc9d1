"""`arena report name=NAME [results_dir=...] [baseline=ARM] [min_effect=POINTS] [allow_mixed=true] [wandb=true]`
(docs/design.md, Report). `arena report evals=true` (the §5.3 table of every `arena eval` run,
docs/eval.md) is arena/evaluation/table.py's: the CLI sends it there.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import pandas as pd

from arena.cli_errors import print_bad_input
from arena.config.verb_args import ReportArgs
from arena.config.verb_grammar import parse_own_args, verb_keys
from arena.io.atomic import atomic_write_text
from arena.runs.layout import Results

from .frames import runs_frame, tidy_frame
from .manifest import auto_seeds_section, chosen_hp, load_manifest
from .table_data import build_table
from . import confirmatory, measures, verdicts
from .mechanisms import mechanism_table, render_mechanisms
from .sequential import judging_level
from .verdicts import MIN_EFFECT
from .tables import render_confirmatory_csv, render_csv, render_latex, render_markdown

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


@dataclass(frozen=True)
class Confirmatory:
    """The report's confirmatory section: one row per finding comparison and the notes that say why."""
    rows: pd.DataFrame
    notes: list[str]


def confirmatory_section(runs: pd.DataFrame, manifest: dict, baseline: Optional[str], *, min_effect: float = MIN_EFFECT,
                         tidy_of: Callable[[], Optional[pd.DataFrame]] = lambda: None, bound=None,
                         alpha: float = verdicts.ALPHA) -> Confirmatory:
    """The swept dimension's findings (confirmatory.families_for) judged on the runs; `tidy_of` gives
    the metrics table when a finding's measure needs the eval curves; `bound`: a seeds=auto sweep's."""
    arms = [a for a in manifest.get("grid", []) if a in set(runs["arm"])] or list(dict.fromkeys(runs["arm"]))
    families = confirmatory.families_for(manifest.get("dimension"), arms, baseline)
    curves = any(f.measure == measures.DROP_FROM_BEST for f in families)
    scored = runs.assign(sweep=runs["sweep"] if "sweep" in runs else "")
    scored = measures.add_measures(scored, tidy_of() if curves else None)
    rows = confirmatory.judge(scored, families, min_effect=min_effect, alpha=alpha, bound=bound)
    return Confirmatory(rows, confirmatory.notes(rows, min_effect=min_effect, alpha=alpha, bound=bound))


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
    # a seeds=auto sweep's confirmatory families are judged under its group-sequential bound and its
    # min_effect (the manifest's auto_seeds record), which its rounds were decided on (docs/design.md,
    # Sweep: seeds=auto); a record without a bound (an older arena's) named one per-look level instead
    auto = manifest.get("auto_seeds") if isinstance(manifest.get("auto_seeds"), dict) else {}
    level = judging_level(auto)
    bound, alpha = level.get("bound"), level.get("alpha", verdicts.ALPHA)
    min_effect = float(auto.get("min_effect", min_effect)) if min_effect == MIN_EFFECT else min_effect
    cells, arm_rows = build_table(runs, manifest, chosen, baseline=baseline, min_effect=min_effect, alpha=alpha)
    section = confirmatory_section(runs, manifest, cells["baseline"].iloc[0] or None, min_effect=min_effect,
                                   tidy_of=lambda: tidy_frame(results_dir, name, runs=runs), bound=bound,
                                   alpha=alpha)
    return manifest, runs, cells, arm_rows, section


def print_summary_table(results_dir: str | Path, name: str, *, allow_mixed: bool = False,
                        baseline: Optional[str] = None, min_effect: float = MIN_EFFECT) -> str:
    """The markdown table text (what table.md holds), for the sweep CLI to print."""
    manifest, _, cells, arms, section = _table(Path(results_dir).resolve(), name, allow_mixed=allow_mixed,
                                               baseline=baseline, min_effect=min_effect)
    return _with_seeds(render_markdown(cells, arms, name=name, confirmatory=section), manifest)


def _with_seeds(markdown: str, manifest: dict) -> str:
    """The markdown, with a seeds=auto sweep's seeds per arm and why (manifest.auto_seeds_section)."""
    section = auto_seeds_section(manifest)
    return markdown if not section else markdown.rstrip("\n") + "\n\n" + section


def write_tables(cells: pd.DataFrame, arms: pd.DataFrame, out: Path, *, name: str, manifest: Optional[dict] = None,
                 confirmatory: Optional[Confirmatory] = None) -> str:
    """table.md, table.tex, table.csv (and confirmatory.csv) under `out`; returns the markdown."""
    markdown = _with_seeds(render_markdown(cells, arms, name=name, confirmatory=confirmatory), manifest or {})
    atomic_write_text(out / "table.md", markdown)
    atomic_write_text(out / "table.tex", render_latex(cells, arms, name=name, confirmatory=confirmatory))
    atomic_write_text(out / "table.csv", render_csv(cells, arms))
    if confirmatory is not None:
        atomic_write_text(out / "confirmatory.csv", render_confirmatory_csv(confirmatory.rows))
    return markdown


def write_report(results_dir: str | Path, name: str, *, allow_mixed: bool = False, wandb: bool = False,
                 figures: bool = True, baseline: Optional[str] = None, min_effect: float = MIN_EFFECT) -> Path:
    """Write the report folder and return its path."""
    # lazy: keeps matplotlib out of this module's import
    from .figures import write_figures

    results_dir = Path(results_dir).resolve()
    manifest, runs, cells, arms, section = _table(results_dir, name, allow_mixed=allow_mixed, baseline=baseline,
                                                  min_effect=min_effect)
    out = Results(results_dir).report(name)
    markdown = write_tables(cells, arms, out, name=name, manifest=manifest, confirmatory=section)
    tidy = tidy_frame(results_dir, name, runs=runs)
    arm_names = list(cells["arm"].unique())
    atomic_write_text(out / "mechanisms.md", render_mechanisms(mechanism_table(tidy, arm_names), name=name))
    if figures:
        write_figures(tidy, runs, out / "figures", arm_order=arm_names, baseline=cells["baseline"].iloc[0] or None)
    if wandb:
        # lazy: keeps matplotlib out of this module's import
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
    try:
        parsed = parse_own_args(ReportArgs, argv)
        opts, given = parsed.args, parsed.given
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
