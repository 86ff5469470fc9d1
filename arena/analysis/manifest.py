"""The sweep manifest, as the report reads it (docs/design.md, Run folder; written by the sweep).

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

from arena.runs.layout import cell_dir, sweep_dir  # noqa: F401 - re-exported for the report
from arena.runs.manifest import CELL_KEYS, ROLES, read_manifest  # noqa: F401 - the one manifest reader

load_manifest = read_manifest


def report_cells(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells the report reads (role == "report"), in manifest order."""
    return [c for c in manifest["cells"] if c["role"] == "report"]


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
