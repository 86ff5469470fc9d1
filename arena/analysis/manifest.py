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
else the whole object). Optional keys `envs` and `seeds` list the sweep's envs and seeds in order;
a `seeds=auto` sweep adds `auto_seeds` (its settings and each arm's seeds and reason;
arena/sweeps/auto_sweep.py).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from arena.runs.layout import Results
from arena.runs.manifest import CELL_KEYS, ROLES, read_manifest  # noqa: F401 - the one manifest reader

load_manifest = read_manifest


def report_cells(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells the report reads (role == "report"), in manifest order."""
    return [c for c in manifest["cells"] if c["role"] == "report"]


def chosen_hp(results_dir: str | Path, name: str, arm: str, env: str) -> Optional[dict[str, Any]]:
    """The search's chosen config for (arm, env): its `hp` entry, else `overrides`, else the whole dict."""
    path = Results(results_dir).chosen(name, arm, env)
    if not path.exists():
        return None
    chosen = json.loads(path.read_text())
    for key in ("hp", "overrides"):
        if isinstance(chosen, dict) and isinstance(chosen.get(key), dict):
            return chosen[key]
    return chosen


def auto_seeds_section(manifest: dict[str, Any]) -> str:
    """The report's "Seeds (seeds=auto)" section: how many seeds each arm got and why, and the bound
    its verdicts are judged under; "" for a sweep with fixed seeds."""
    record = manifest.get("auto_seeds")
    if not isinstance(record, dict) or not isinstance(record.get("arms"), dict):
        return ""
    if record.get("bound"):
        families = "; ".join(f"{f}: {', '.join(names)}" for f, names in (record.get("families") or {}).items())
        how = (f"{record.get('first_seeds')} seeds per arm first, then one more per round to each end of an "
               f"underpowered confirmatory comparison ({families or 'none'}), up to max_seeds={record.get('max_seeds')}. "
               f"Each family is judged at every look under a group-sequential bound ({record.get('bound')} alpha "
               f"spending over the {record.get('looks')} looks, family-wise {record.get('alpha')}), so its false-verdict "
               "rate stays <= 0.05 whatever the stopping (docs/design.md, Sweep: seeds=auto); min_effect "
               f"{record.get('min_effect')} points.")
    else:  # an older arena's record: Bonferroni over the looks
        how = (f"{record.get('first_seeds')} seeds per arm first, then one more per round to each arm with an "
               f"underpowered comparison, up to max_seeds={record.get('max_seeds')}. Up to {record.get('looks')} looks, "
               f"so every verdict of this sweep holds at alpha = 0.05 / {record.get('looks')} = "
               f"{record.get('alpha', float('nan')):.4g} per look; min_effect {record.get('min_effect')} points.")
    lines = ["## Seeds (seeds=auto)", "", how, ""]
    for arm, row in record["arms"].items():
        verdicts = ", ".join(f"{fam} {v}" for fam, v in (row.get("verdicts") or {}).items())
        lines.append(f"- {arm}: {row.get('seeds')} seeds, {row.get('reason')}" + (f" ({verdicts})" if verdicts else ""))
    return "\n".join(lines) + "\n"
