"""Environment registry: `arena.envs.make(name, **kwargs)`.

Modules are imported lazily so that `import arena.envs` stays cheap and an optional extra
(alfworld) is needed only when its environment is made.
"""
from __future__ import annotations

import importlib

from .base import EVAL_SEED_OFFSET, Env, eval_seed, is_eval_seed

# name -> "module:factory"
ENVS = {
    "sokoban": "arena.envs.sokoban:SokobanEnv",
    "tir_math": "arena.envs.tir_math:TirMathEnv",
    "household": "arena.envs.household:HouseholdEnv",
    "shop": "arena.envs.shop:ShopEnv",
    "alfworld": "arena.envs.alfworld:AlfworldEnv",
    "sanity": "arena.envs.sanity:SanityEnv",  # one-turn RL correctness check (issue #4)
}


def make(name: str, **kwargs) -> Env:
    """Build an environment by registry name; unknown names list the valid ones."""
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; valid: {', '.join(sorted(ENVS))}")
    module, factory = ENVS[name].split(":")
    return getattr(importlib.import_module(module), factory)(**kwargs)


__all__ = ["ENVS", "EVAL_SEED_OFFSET", "Env", "eval_seed", "is_eval_seed", "make"]
