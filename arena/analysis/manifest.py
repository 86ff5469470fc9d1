"""The sweep manifest, as the report reads it (decisions.md §F; written by the sweep, issue #5).

`<results_dir>/sweeps/<name>/manifest.json`:

    {
      "name": "clipping-default",            # the sweep's name
      "dimension": "clipping",               # the swept dimension
      "grid": ["grpo", "gspo", ...],         # arm names in grid order (the table's row order)
      "cells": [
        {"arm": "gspo", "env": "sokoban", "seed": 0, "cell_id": "3f2a...",
         "role": "report" | "search",        # the report reads only role == "report"
         "method": "gspo",                   # the preset (row group = METHODS[method].group)
         "overrides": {"ppo_num_mini_batches": 4}}   # the arm's overrides on top of the preset
      ]
    }

Cells live at `<results_dir>/sweeps/<name>/cells/<cell_id>/` (a RunFolder). The search's
choice for an arm on an environment: `<results_dir>/sweeps/<name>/search/<arm>/<env>/chosen.json`
(any JSON object; its `hp` key if present, else its `overrides` key (what the sweep's search writes),
else the whole object). Optional keys `envs` and `seeds` list the sweep's envs and seeds in order.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

ROLES = ("report", "search")
CELL_KEYS = ("arm", "env", "seed", "cell_id", "role", "method")


def sweep_dir(results_dir: str | Path, name: str) -> Path:
    return Path(results_dir).resolve() / "sweeps" / name


def load_manifest(results_dir: str | Path, name: str) -> dict[str, Any]:
    """The manifest of sweep `name`; ValueError (listing the sweeps that exist) if absent or bad."""
    path = sweep_dir(results_dir, name) / "manifest.json"
    if not path.exists():
        root = Path(results_dir).resolve() / "sweeps"
        found = sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.exists() else []
        raise ValueError(f"no sweep {name!r} under {root} (no {path.name}); valid: {', '.join(found) or 'none'}")
    manifest = json.loads(path.read_text())
    for key in ("grid", "cells"):
        if key not in manifest:
            raise ValueError(f"{path}: missing key {key!r}; a manifest holds name, dimension, grid, cells")
    for i, cell in enumerate(manifest["cells"]):
        missing = [k for k in CELL_KEYS if k not in cell]
        if missing:
            raise ValueError(f"{path}: cell {i} lacks {missing}; each cell holds {', '.join(CELL_KEYS)}, overrides")
        if cell["role"] not in ROLES:
            raise ValueError(f"{path}: cell {i} has role {cell['role']!r}; valid: {', '.join(ROLES)}")
        unknown_arm = cell["arm"] not in manifest["grid"]
        if unknown_arm:
            raise ValueError(f"{path}: cell {i} arm {cell['arm']!r} is not in the grid; valid: {', '.join(manifest['grid'])}")
    return manifest


def report_cells(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells the report reads (role == "report"), in manifest order."""
    return [c for c in manifest["cells"] if c["role"] == "report"]


def cell_dir(results_dir: str | Path, name: str, cell_id: str) -> Path:
    return sweep_dir(results_dir, name) / "cells" / cell_id


def chosen_hp(results_dir: str | Path, name: str, arm: str, env: str) -> Optional[dict[str, Any]]:
    """The search's chosen config for (arm, env): its `hp` entry, else `overrides`, else the whole dict."""
    path = sweep_dir(results_dir, name) / "search" / arm / env / "chosen.json"
    if not path.exists():
        return None
    chosen = json.loads(path.read_text())
    for key in ("hp", "overrides"):
        if isinstance(chosen, dict) and isinstance(chosen.get(key), dict):
            return chosen[key]
    return chosen
