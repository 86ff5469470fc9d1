"""A sweep's state from disk alone: the manifest plus each cell's run folder, and a plain
per-arm summary table (the fallback when the report can't be built)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Callable

from .ledger import DONE, cell_state


def sweep_dir(results_dir: str | Path, name: str) -> Path:
    return Path(results_dir).resolve() / "sweeps" / name


def read_manifest(results_dir: str | Path, name: str) -> dict:
    path = sweep_dir(results_dir, name) / "manifest.json"
    if not path.exists():
        root = Path(results_dir).resolve() / "sweeps"
        known = sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.is_dir() else []
        raise ValueError(f"no sweep named {name!r} under {root}; valid: {', '.join(known) or '(none)'}")
    return json.loads(path.read_text())


def cell_states(results_dir: str | Path, manifest: dict) -> list[tuple[dict, str]]:
    cells = sweep_dir(results_dir, manifest["name"]) / "cells"
    return [(row, cell_state(cells / row["cell_id"])) for row in manifest["cells"]]


def status_lines(results_dir: str | Path, name: str) -> list[str]:
    manifest = read_manifest(results_dir, name)
    rows = cell_states(results_dir, manifest)
    counts: dict[str, int] = {}
    for _, state in rows:
        counts[state] = counts.get(state, 0) + 1
    lines = [f"sweep {name} ({manifest['dimension']}): {len(rows)} cells: "
             + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "busy", "failed", "missing"))]
    for row, state in rows:
        lines.append(f"  {row['role']:6s} {row['arm']:16s} {row['env']:10s} seed={row['seed']:<4d} {row['cell_id']}  {state}")
    return lines


def arm_summary_rows(results_dir: str | Path, name: str) -> list[dict]:
    """One row per (arm, env) of the report cells: done count, mean/sd final success, stability."""
    manifest = read_manifest(results_dir, name)
    cells = sweep_dir(results_dir, name) / "cells"
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in manifest["cells"]:
        if row["role"] == "report":
            groups.setdefault((row["arm"], row["env"]), []).append(row)
    out = []
    for (arm, env), rows in groups.items():
        summaries = [json.loads((cells / r["cell_id"] / "summary.json").read_text())
                     for r in rows if cell_state(cells / r["cell_id"]) == DONE]
        finals = [float(s["final_eval_success"]) for s in summaries if s.get("final_eval_success") is not None]
        out.append({
            "arm": arm, "env": env, "done": len(summaries), "cells": len(rows),
            "success_mean": statistics.fmean(finals) if finals else None,
            "success_sd": statistics.pstdev(finals) if len(finals) > 1 else (0.0 if finals else None),
            # a method is stable on an env only if all of its seeds are (decisions §E)
            "stable": (all(s.get("stable") is True for s in summaries) if len(summaries) == len(rows) else None),
        })
    return out


def print_plain_table(results_dir: str | Path, name: str, log: Callable = print) -> int:
    rows = arm_summary_rows(results_dir, name)
    log(f"{'arm':16s} {'env':10s} {'done':>7s} {'success':>15s} {'stable':>7s}")
    for r in rows:
        succ = "-" if r["success_mean"] is None else f"{r['success_mean']:.3f}±{r['success_sd']:.3f}"
        log(f"{r['arm']:16s} {r['env']:10s} {r['done']:>3d}/{r['cells']:<3d} {succ:>15s} {str(r['stable']):>7s}")
    return len(rows)


def print_summary(results_dir: str | Path, name: str, log: Callable = print) -> None:
    """Write the sweep's report (tables, figures; issue #6) and print its table. A report that
    can't be built (e.g. mixed git SHAs) falls back to the plain per-arm table, with the reason."""
    from arena.analysis.report import print_summary_table, write_report

    results_dir = str(Path(results_dir).resolve())
    try:
        report = write_report(results_dir, name)
        log(print_summary_table(results_dir, name))
        log(f"[sweep] report: {report}")
    except ValueError as exc:
        log(f"[sweep] report not written: {exc}")
        print_plain_table(results_dir, name, log=log)
