"""One Hydra composition per (env, run overrides); each arm's (and search point's) own
overrides are then applied to a copy of it, the way Hydra itself applies them.

Hydra's compose costs ~0.1-0.3 s (defaults tree, YAML loads, deep copies), and a sweep used to
pay it once per arm and once per search point. An arm's keys are plain value overrides
(`po.method`, `po.hp.eps_high`, `ppo_num_mini_batches`, ...); Hydra applies such overrides
after the defaults list is composed, in order, with `ConfigLoaderImpl._apply_overrides_to_config`.
So

    compose(common + arm) == apply(arm, compose(common))      when no arm key is a config group

and that is what `fast_config` does, with Hydra's own override parser and applier. An arm that
names a group (`env=`, `budget=`) or anything the fast path can't take (a parse error, an unknown
key) returns None, and the caller composes it with `load_config` (which names the valid choices).
tests/sweeps/test_compose.py checks the equality on the shipped grids and search points.
"""
from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig

from arena.config import load_config
from arena.config.load import GROUPS, OPEN_NAMESPACES, validate

from .grids import override_strings


def _hydra_overrides(overrides: dict[str, Any]) -> list[str]:
    """`key=value` strings as load_config hands them to Hydra (open dicts get `++`)."""
    out = []
    for text in override_strings(overrides):
        key = text.split("=", 1)[0]
        out.append(("++" + text) if key.startswith(OPEN_NAMESPACES) else text)
    return out


def fast_config(base: DictConfig, overrides: dict[str, Any]) -> Optional[DictConfig]:
    """`base` (composed with the run overrides) + the arm's value overrides, validated like
    load_config; None when the overrides need a full composition (or are bad)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(str(key).lstrip("+~") in GROUPS for key in overrides):
        return None
    try:
        parsed = OverridesParser.create().parse_overrides(overrides=_hydra_overrides(overrides))
        cfg = base.copy()
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        validate(cfg)  # the checks load_config runs after composing
    except Exception:  # noqa: BLE001 - any problem: let load_config compose it and explain
        return None
    return cfg


def arm_config(common: list[str], overrides: dict[str, Any], env: str, *, base: Optional[DictConfig]) -> DictConfig:
    """The config of `env=<env> + common + overrides`: fast from `base` when possible, else
    composed by Hydra (raises BadConfig, a ValueError, listing the valid choices)."""
    if base is not None and overrides:
        cfg = fast_config(base, overrides)
        if cfg is not None:
            return cfg
    return load_config([f"env={env}", *common, *override_strings(overrides)])
