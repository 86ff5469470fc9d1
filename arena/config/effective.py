"""The values a run would get, and which file set each (`arena <verb> --help` with the command
line's keys: docs/design.md, CLI grammar and exit codes).

Hydra composes the root config in this order, last wins (configs/config.yaml): the schema
(arena/config/schema.py), configs/env/<env>.yaml, configs/budget/<budget>.yaml,
configs/env_budget/<env>_<budget>.yaml when it exists (after the files its own `defaults:`
names), then the command line. `effective_values` composes (without the run checks, so no torch
import) and names, for every key, the last of those that sets it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import yaml

from .args import BadArgument
from .load import GROUPS, OPEN_NAMESPACES, _normalise, config_dir, group_options, valid_keys
from .verb_grammar import parse_overrides

COMMAND_LINE = "command line"
SCHEMA = "schema"


def _flatten(node: Any, prefix: str, known: frozenset[str]) -> list[str]:
    """The dotted keys a YAML mapping sets; a known key (`env.kwargs`) is one key, not its parts."""
    out = []
    for key, value in (node or {}).items():
        path = f"{prefix}{key}"
        out += _flatten(value, path + ".", known) if isinstance(value, dict) and path not in known else [path]
    return out


def file_keys(path: Path, group: str, known: frozenset[str]) -> list[tuple[str, str]]:
    """[(dotted key, the file that sets it)] of one config file, the files its `defaults:` list
    names first (a budget file may start from another: `defaults: [household_default]`)."""
    text = path.read_text()
    data = yaml.safe_load(text) or {}
    package = re.search(r"#\s*@package\s+(\S+)", text)
    package_name = package.group(1) if package else group
    prefix = "" if package_name == "_global_" else package_name + "."
    out: list[tuple[str, str]] = []
    for parent in data.pop("defaults", None) or []:
        if isinstance(parent, str) and parent != "_self_" and (path.parent / f"{parent}.yaml").is_file():
            out += file_keys(path.parent / f"{parent}.yaml", group, known)
    label = str(path.relative_to(config_dir().parent)) if path.is_relative_to(config_dir().parent) else str(path)
    return out + [(key, label) for key in _flatten(data, prefix, known)]


def composing_overrides(args: Iterable[str]) -> list[tuple[str, str, Any]]:
    """(argument, key, value) of each of the command line's run-config overrides that compose: a
    schema key or an open namespace's, a config group with one of its files (a sweep's
    `env=[a,b]` list is left out, and so is what Hydra's grammar does not parse: help still prints)."""
    keep = []
    for arg in args:
        try:
            (override,) = parse_overrides([arg])
        except BadArgument:
            continue
        if override.is_delete():  # `~key`: nothing to show
            continue
        key, value = override.key_or_group, None if override.is_sweep_override() else override.value()
        if key in GROUPS:
            if isinstance(value, str) and value in group_options(key):
                keep.append((arg, key, value))
        elif key in valid_keys() or key.startswith(OPEN_NAMESPACES):
            keep.append((arg, key, value))
    return keep


def run_overrides(args: Iterable[str]) -> list[str]:
    """The command line's run-config overrides that compose (composing_overrides), as given."""
    return [arg for arg, _, _ in composing_overrides(args)]


def chosen_groups(args: Iterable[str]) -> dict[str, str]:
    """{config group: the file the command line chooses}, the last occurrence winning."""
    return {key: value for _, key, value in composing_overrides(args) if key in GROUPS}


def compose_plain(overrides: Sequence[str]):
    """Hydra's composition of the root config with `overrides`, before the run checks."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    # lazy: keeps hydra out of this module's import
    from .store import register

    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            return compose("config", overrides=_normalise(list(overrides)))
    finally:
        GlobalHydra.instance().clear()


def effective_values(args: Iterable[str], keys: Iterable[str]) -> tuple[dict[str, Any], dict[str, str], Optional[str]]:
    """({key: value}, {key: where it is set}, why the command line could not be composed or None)
    for the dotted `keys`; a key no file sets comes from the schema."""
    from omegaconf import OmegaConf

    keys = list(keys)
    overrides, problem = run_overrides(args), None
    try:
        cfg = compose_plain(overrides)
    except Exception as exc:  # noqa: BLE001 - help still prints, with the defaults and the reason
        cfg, overrides, problem = compose_plain([]), [], str(exc).splitlines()[0]
    values = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v
              for k in keys for v in [OmegaConf.select(cfg, k, default=None)]}
    known = frozenset(keys)
    env, budget = str(cfg.env.name), str(cfg.budget)
    files = [(config_dir() / "env" / f"{env}.yaml", "env"), (config_dir() / "budget" / f"{budget}.yaml", "budget"),
             (config_dir() / "env_budget" / f"{env}_{budget}.yaml", "env_budget")]
    sources = {k: SCHEMA for k in keys}
    for path, group in files:
        if path.is_file():
            sources.update({k: label for k, label in file_keys(path, group, known) if k in sources})
    for _, key, _ in composing_overrides(overrides):
        key = next((k for k in keys if key == k or key.startswith(k + ".")), key)
        if key in sources:
            sources[key] = COMMAND_LINE
    return values, sources, problem
