"""Sweep grids as data: `grids/<dimension>.yaml` files holding a list of named arms.

An arm is a dict with a `name` plus `po.*` and top-level run overrides. A grid is crossed with
an environment axis and a seed axis. Grids are looked up, in order, in the directories of
$ARENA_GRIDS (os.pathsep-separated), then in the package's own `arena/sweeps/grids/`; a
`grid=PATH` argument names a file directly. All functions here are pure except the loaders.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

PACKAGE_GRIDS = Path(__file__).resolve().parent / "grids"


def grid_dirs() -> list[Path]:
    extra = [Path(p).expanduser().resolve() for p in os.environ.get("ARENA_GRIDS", "").split(os.pathsep) if p]
    return extra + [PACKAGE_GRIDS]


def available_dimensions() -> list[str]:
    names = {p.stem for d in grid_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return sorted(names)


def grid_path(dimension: str) -> Path:
    for d in grid_dirs():
        candidate = d / f"{dimension}.yaml"
        if candidate.is_file():
            return candidate
    raise ValueError(f"unknown dimension {dimension!r}; valid: {', '.join(available_dimensions())}")


def load_grid(dimension: str | None = None, path: str | Path | None = None) -> list[dict[str, Any]]:
    """The arms of a grid (by dimension name, or from a file); each arm keeps its `name`."""
    source = Path(path).expanduser().resolve() if path else grid_path(dimension)
    if not source.is_file():
        raise ValueError(f"grid file {str(source)!r} does not exist")
    data = yaml.safe_load(source.read_text()) or {}
    return validate_arms(data.get("arms"), source=str(source))


def validate_arms(arms: Any, *, source: str = "grid") -> list[dict[str, Any]]:
    if not isinstance(arms, list) or not arms:
        raise ValueError(f"{source}: expected a non-empty list under 'arms:'")
    seen = set()
    for arm in arms:
        if not isinstance(arm, dict) or not isinstance(arm.get("name"), str):
            raise ValueError(f"{source}: every arm needs a string 'name', got {arm!r}")
        if arm["name"] in seen:
            raise ValueError(f"{source}: duplicate arm name {arm['name']!r}")
        seen.add(arm["name"])
    return [dict(a) for a in arms]


def parse_seeds(value: Any) -> list[int]:
    """`3` -> [0, 1, 2]; `[0, 5, 9]` -> [0, 5, 9] (order kept, duplicates rejected)."""
    if isinstance(value, bool):
        raise ValueError(f"seeds must be a count N (seeds 0..N-1) or a list like [0,5,9]; got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"seeds=N needs N >= 1; got {value}")
        return list(range(value))
    if isinstance(value, (list, tuple)) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        if len(set(value)) != len(value):
            raise ValueError(f"seeds has duplicates: {list(value)}")
        return list(value)
    raise ValueError(f"seeds must be a count N (seeds 0..N-1) or a list like [0,5,9]; got {value!r}")


def parse_envs(value: Any) -> list[str]:
    """`sokoban` -> ['sokoban']; `[sokoban, alfworld]` -> both."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(e, str) for e in value):
        if len(set(value)) != len(value):
            raise ValueError(f"env has duplicates: {list(value)}")
        return list(value)
    raise ValueError(f"env must be a name or a list of names like [sokoban,alfworld]; got {value!r}")


def arm_overrides(arm: dict[str, Any]) -> dict[str, Any]:
    """The run overrides of an arm (everything but its name)."""
    return {k: v for k, v in arm.items() if k != "name"}


def override_strings(overrides: dict[str, Any]) -> list[str]:
    """{'po.method': 'gspo', 'steps': 5, 'po.seq_mask_delta': None} -> Hydra `key=value` strings."""
    out = []
    for key, value in overrides.items():
        if value is None:
            text = "null"
        elif isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, (list, dict)):
            text = yaml.safe_dump(value, default_flow_style=True).strip()
        else:
            text = str(value)
        out.append(f"{key}={text}")
    return out
