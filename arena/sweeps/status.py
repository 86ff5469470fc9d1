"""A sweep's state from disk alone: the manifest plus each cell's run folder, and a plain
per-arm summary table (the fallback when the report can't be built). The layout, the manifest
reader and the summary check are arena.runs' (docs/design.md, Run folder); "±" is the sample
standard deviation over seeds, as in the report (docs/methods.md, Statistics)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Optional

from arena.runs.folder import RunFolder
from arena.runs.layout import COPIED_FROM_FILE, Results
from arena.runs.manifest import read_manifest

from .ledger import DONE, cell_state

EVAL_KEY = "eval/success_rate"  # the metrics row key of an eval point (arena/metric_keys.py)

__all__ = ["arm_summary_rows", "cell_states", "print_plain_table", "print_summary", "read_manifest",
           "status_lines"]


def cell_states(results_dir: str | Path, manifest: dict) -> list[tuple[dict, str]]:
    return [(row, cell_state(Results(results_dir).cell(manifest["name"], row["cell_id"]))) for row in manifest["cells"]]


def status_lines(results_dir: str | Path, name: str) -> list[str]:
    manifest = read_manifest(results_dir, name)
    rows = cell_states(results_dir, manifest)
    counts: dict[str, int] = {}
    for _, state in rows:
        counts[state] = counts.get(state, 0) + 1
    lines = [f"sweep {name} ({manifest['dimension']}): {len(rows)} cells: "
             + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "busy", "failed", "missing"))]
    for row, state in rows:
        run = RunFolder(Results(results_dir).cell(name, row["cell_id"]), expect_cell_id=row["cell_id"])
        note = ""
        if state != DONE and run.foreign_cell():  # a copied folder: never run over, never scored
            note = f"  ({run.summary_problem()}; move this folder away, then rerun the sweep)"
        elif state != DONE and run.summary_file.exists():  # present but no proof: it will be rerun
            note = f"  ({run.summary_problem()}; the next sweep sets it aside and reruns the cell)"
        elif state == DONE:
            mismatch = summary_metrics_mismatch(run)
            note = f"  (WARNING: {mismatch}; hand-edited? the report reads summary.json)" if mismatch else ""
            source = copied_from(run.path)
            note += f"  (copied from sweep {source})" if source else ""
        lines.append(f"  {row['role']:6s} {row['arm']:16s} {row['env']:10s} seed={row['seed']:<4d} {row['cell_id']}  "
                     f"{state}{note}")
    return lines


def copied_from(cell_dir: Path) -> Optional[str]:
    """The sweep a cell's folder was copied from (arena/sweeps/twins.py), or None: not a copy."""
    try:
        source = Path(json.loads((Path(cell_dir) / COPIED_FROM_FILE).read_text())["from"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return source.parent.parent.name  # <results_dir>/sweeps/<sweep>/cells/<cell_id>


def summary_metrics_mismatch(run: RunFolder) -> Optional[str]:
    """Where a done run's summary.json disagrees with its metrics.jsonl, or None: the summary's
    final_eval_success / initial_eval_success must be the last / first `eval/success_rate` row
    and its steps the last step (arena.runs.summary.build_summary builds them so)."""
    try:
        summary, rows = run.summary(), run.read_metrics()
    except (OSError, ValueError) as exc:
        return f"metrics.jsonl is unreadable ({exc})"
    if summary is None or not rows:
        return None
    points = [r[EVAL_KEY] for r in rows if isinstance(r.get(EVAL_KEY), (int, float))]
    expected = {"steps": max(r["step"] for r in rows)}
    if points:
        expected.update(final_eval_success=points[-1], initial_eval_success=points[0])
    for key, value in expected.items():
        got = summary.get(key)
        if not isinstance(got, (int, float)) or abs(float(got) - float(value)) > 1e-9:
            return f"summary.json says {key}={got!r}, metrics.jsonl gives {value!r}"
    return None


def arm_summary_rows(results_dir: str | Path, name: str) -> list[dict]:
    """One row per (arm, env) of the report cells: done count, mean and sample sd of the final
    success over the done seeds (sd None with fewer than 2), stability."""
    # lazy: keeps numpy, pandas, scipy, torch out of this module's import
    from arena.analysis.stats import mean_std

    manifest = read_manifest(results_dir, name)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in manifest["cells"]:
        if row["role"] == "report":
            groups.setdefault((row["arm"], row["env"]), []).append(row)
    out = []
    for (arm, env), rows in groups.items():
        folders = [RunFolder(Results(results_dir).cell(name, r["cell_id"]), expect_cell_id=r["cell_id"]) for r in rows]
        summaries = [s for s in (f.summary() for f in folders) if s is not None]
        finals = [float(s["final_eval_success"]) for s in summaries if s.get("final_eval_success") is not None]
        mean, sd = mean_std(finals)
        out.append({
            "arm": arm, "env": env, "done": len(summaries), "cells": len(rows),
            "success_mean": mean if finals else None,
            "success_sd": sd if not math.isnan(sd) else None,
            # a method is stable on an env only if all of its seeds are (docs/methods.md, Stability)
            "stable": (all(s.get("stable") is True for s in summaries) if len(summaries) == len(rows) else None),
        })
    return out


def format_success(mean, sd) -> str:
    """`mean±sd` (sample sd), `mean` alone with one seed, `-` with none."""
    if mean is None:
        return "-"
    return f"{mean:.3f}" if sd is None else f"{mean:.3f}±{sd:.3f}"


def print_plain_table(results_dir: str | Path, name: str, log: Callable = print) -> int:
    rows = arm_summary_rows(results_dir, name)
    log(f"{'arm':16s} {'env':10s} {'done':>7s} {'success':>15s} {'stable':>7s}")
    for r in rows:
        succ = format_success(r["success_mean"], r["success_sd"])
        log(f"{r['arm']:16s} {r['env']:10s} {r['done']:>3d}/{r['cells']:<3d} {succ:>15s} {str(r['stable']):>7s}")
    return len(rows)


def print_summary(results_dir: str | Path, name: str, log: Callable = print) -> None:
    """Write the sweep's report (tables, figures) and print its table. A report that can't be
    built (e.g. mixed git SHAs) falls back to the plain per-arm table, with the reason."""
    # lazy: keeps numpy, pandas, scipy, torch out of this module's import
    from arena.analysis.report import print_summary_table, write_report

    results_dir = str(Path(results_dir).resolve())
    try:
        report = write_report(results_dir, name)
        log(print_summary_table(results_dir, name))
        log(f"[sweep] report: {report}")
    except ValueError as exc:
        log(f"[sweep] report not written: {exc}")
        print_plain_table(results_dir, name, log=log)
