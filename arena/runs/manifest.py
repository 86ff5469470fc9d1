"""The one reader of a sweep's manifest.json (docs/design.md, Run folder; the sweep writes it):

    {
      "name": "clipping-default",            # the sweep's name
      "dimension": "clipping",               # the swept dimension
      "grid": ["grpo", "gspo", ...],         # arm names in grid order (the table's row order)
      "envs": [...], "seeds": [...],         # optional: the sweep's envs and seeds in order
      "cells": [
        {"arm": "gspo", "env": "sokoban", "seed": 0, "cell_id": "3f2a...",
         "role": "report" | "search",        # the report reads only role == "report"
         "method": "gspo",                   # the preset
         "overrides": {"ppo_num_mini_batches": 4}}   # the arm's overrides on top of the preset
      ],
      "auto_seeds": {...}                    # seeds=auto only: settings, alpha, each arm's seeds
    }                                        # and reason (arena/sweeps/auto_sweep.py)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .layout import Results

ROLES = ("report", "search")
CELL_KEYS = ("arm", "env", "seed", "cell_id", "role", "method")


def read_manifest(results_dir: str | Path, name: str) -> dict[str, Any]:
    """The manifest of sweep `name`; ValueError naming the file (or listing the sweeps that
    exist) when it is absent, unreadable or malformed."""
    results = Results(results_dir)
    path = results.manifest(name)
    if not path.exists():
        found = [p.parent.name for p in results.sweep_manifests()]
        raise ValueError(f"no sweep {name!r} under {results.sweeps} (no {path.name}); valid: {', '.join(found) or 'none'}")
    try:
        manifest = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); rerun the sweep command to rewrite it") from exc
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: expected a JSON object with name, dimension, grid, cells")
    for key in ("grid", "cells"):
        if key not in manifest:
            raise ValueError(f"{path}: missing key {key!r}; a manifest holds name, dimension, grid, cells")
    for i, cell in enumerate(manifest["cells"]):
        missing = [k for k in CELL_KEYS if k not in cell]
        if missing:
            raise ValueError(f"{path}: cell {i} lacks {missing}; each cell holds {', '.join(CELL_KEYS)}, overrides")
        if cell["role"] not in ROLES:
            raise ValueError(f"{path}: cell {i} has role {cell['role']!r}; valid: {', '.join(ROLES)}")
        if cell["arm"] not in manifest["grid"]:
            raise ValueError(f"{path}: cell {i} arm {cell['arm']!r} is not in the grid; valid: {', '.join(manifest['grid'])}")
    manifest.setdefault("name", name)
    manifest.setdefault("dimension", name)
    return manifest


def report_key(cell: dict[str, Any]) -> tuple[str, str, int]:
    """(arm, env, seed): what a report cell stands for, whatever its cell id."""
    return str(cell["arm"]), str(cell["env"]), int(cell["seed"])


def report_cells_on_disk(results_dir: str | Path, name: str) -> list[dict[str, Any]] | None:
    """The report cells of sweep `name`'s manifest on disk (a cell whose seed is not an integer
    is skipped), or None when it is absent or unreadable (a sweep command then writes a new
    one: there is nothing on disk to protect)."""
    try:
        cells = [c for c in read_manifest(results_dir, name)["cells"] if c["role"] == "report"]
    except (ValueError, TypeError, AttributeError):
        return None
    out = []
    for cell in cells:
        try:
            report_key(cell)
        except (TypeError, ValueError):
            continue
        out.append(cell)
    return out
