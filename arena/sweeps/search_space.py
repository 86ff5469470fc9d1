"""The per-member search table (search_space.yaml) -> the ordered points of one arm."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TABLE_FILE = Path(__file__).resolve().parent / "search_space.yaml"


def load_table(path: Path = TABLE_FILE) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def arm_points(po, table: dict[str, Any]) -> list[dict[str, Any]]:
    """[{}] (the preset's defaults) + the table's points for the arm's resolved members, in the
    order clipping, sequence mask (only when on), advantage, filtering. `po` is a ResolvedPO."""
    points: list[dict[str, Any]] = [{}]
    points += table["clipping"].get(po.clipping, [])
    if po.seq_mask_delta is not None:
        points += table["seq_mask"]
    points += table["advantage"].get(po.advantage, [])
    points += table["filtering"].get(po.filtering, [])
    return [dict(p) for p in points]
