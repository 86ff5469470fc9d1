"""Sweep grids as data: `grids/<dimension>.yaml` files holding a list of named arms.

An arm is a dict with a `name` plus `po.*` and top-level run overrides. A grid is crossed with
an environment axis and a seed axis. Grids are looked up, in order, in the directories of
$ARENA_GRIDS (os.pathsep-separated), then in the package's own `arena/sweeps/grids/`; a
`grid=PATH` argument names a file directly. All functions here are pure except the loaders.
"""
from __future__ import annotations

import os
import sys
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
    """The first `<dir>/<dimension>.yaml` of grid_dirs(); one from $ARENA_GRIDS that shadows a
    shipped grid of the same name is announced on stderr, never taken silently."""
    for d in grid_dirs():
        candidate = d / f"{dimension}.yaml"
        if candidate.is_file():
            shipped = PACKAGE_GRIDS / f"{dimension}.yaml"
            if d != PACKAGE_GRIDS and shipped.is_file():
                print(f"arena: NOTICE: dimension={dimension} is read from {candidate} ($ARENA_GRIDS), which shadows "
                      f"the shipped grid {shipped}", file=sys.stderr)
            return candidate
    raise ValueError(f"unknown dimension {dimension!r}; valid: {', '.join(available_dimensions())}")


def load_grid(dimension: str | None = None, path: str | Path | None = None) -> list[dict[str, Any]]:
    """The arms of a grid (by dimension name, or from a file); each arm keeps its `name`."""
    return load_grid_located(dimension, path)[0]


def load_grid_located(dimension: str | None = None, path: str | Path | None = None) -> tuple[list[dict], list[str]]:
    """(arms, where each arm is written: "<file>:<line>"). ValueError naming the file and line
    for a file that is not YAML, not a mapping with a non-empty `arms:` list, or whose arms
    lack a safe unique name."""
    source = Path(path).expanduser().resolve() if path else grid_path(dimension)
    if not source.is_file():
        raise ValueError(f"grid={str(source)!r}: no such file; valid: a YAML file with 'arms:', or dimension= one of "
                         f"{', '.join(available_dimensions())}")
    text = source.read_text()
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else str(source)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{where}: not valid YAML ({problem}); a grid is a mapping like 'arms: [{{name: a, "
                         f"po.method: grpo}}]'") from exc
    if not isinstance(data, dict):
        line = node.start_mark.line + 1 if node is not None else 1
        raise ValueError(f"{source}:{line}: a grid must be a mapping with an 'arms:' list, got a "
                         f"{type(data).__name__}; valid: 'arms: [{{name: a, po.method: grpo}}, ...]'")
    lines = _arm_lines(node)
    arms = validate_arms(data.get("arms"), source=str(source), lines=lines)
    return arms, [f"{source}:{lines[i]}" if i < len(lines) else str(source) for i in range(len(arms))]


def _arm_lines(node) -> list[int]:
    """1-based line of each item of the top-level `arms:` list (from yaml.compose's marks)."""
    for key, value in getattr(node, "value", []) if isinstance(node, yaml.MappingNode) else []:
        if key.value == "arms" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def validate_arms(arms: Any, *, source: str = "grid", lines: list[int] | None = None) -> list[dict[str, Any]]:
    """Arms with safe (path-part), unique string names; ValueError naming source:line."""
    # lazy: keeps omegaconf out of this module's import
    from arena.runs.layout import check_name

    if not isinstance(arms, list) or not arms:
        raise ValueError(f"{source}: expected a non-empty list under 'arms:'")
    seen: dict[str, str] = {}
    for i, arm in enumerate(arms):
        where = f"{source}:{lines[i]}" if lines and i < len(lines) else f"{source}: arm {i + 1}"
        if not isinstance(arm, dict) or not isinstance(arm.get("name"), str):
            raise ValueError(f"{where}: every arm needs a string 'name', got {arm!r}")
        try:
            check_name("name", arm["name"])  # arm names are folder names (search/<arm>/...)
        except ValueError as exc:
            raise ValueError(f"{where}: arm {exc}") from None
        if arm["name"] in seen:
            raise ValueError(f"{where}: duplicate arm name {arm['name']!r} (first at {seen[arm['name']]}); "
                             "valid: a name used once per grid")
        seen[arm["name"]] = where
    return [dict(a) for a in arms]


def parse_seeds(value: Any) -> list[int]:
    """`3` -> [0, 1, 2]; `[0, 5, 9]` -> [0, 5, 9] (order kept; duplicates and negatives rejected)."""
    if isinstance(value, bool):
        raise ValueError(f"seeds must be a count N (seeds 0..N-1), a list like [0,5,9], or auto; got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"seeds=N needs N >= 1; got {value}; valid: a count N >= 1, a list like [0,5,9], or auto")
        return list(range(value))
    if isinstance(value, (list, tuple)) and value and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                          for s in value):
        if len(set(value)) != len(value):
            raise ValueError(f"seeds has duplicates: {list(value)}")
        return list(value)
    raise ValueError(f"seeds must be a count N >= 1 (seeds 0..N-1), a list of integers >= 0 like [0,5,9], or auto "
                     f"(seeds in rounds, with max_seeds=N); got {value!r}")


def parse_envs(value: Any) -> list[str]:
    """`sokoban` -> ['sokoban']; `[sokoban, alfworld]` -> both."""
    if isinstance(value, str) and "," in value:  # `envs=sokoban,shop`: Hydra's multirun syntax
        # lazy: keeps omegaconf out of this module's import
        from arena.config.args import comma_list_message

        raise ValueError(comma_list_message("env", value))
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
