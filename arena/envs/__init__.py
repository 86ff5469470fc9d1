"""Environment registry: `arena.envs.make(name, **kwargs)`.

Modules are imported lazily so that `import arena.envs` stays cheap and an optional extra
(alfworld) is needed only when its environment is made.
"""
from __future__ import annotations

import importlib
from typing import Optional

from .base import EVAL_SEED_OFFSET, Env, EnvUnavailableError, eval_seed, is_eval_seed

# name -> "module:factory"
ENVS = {
    "sokoban": "arena.envs.sokoban:SokobanEnv",
    "tir_math": "arena.envs.tir_math:TirMathEnv",
    "household": "arena.envs.household:HouseholdEnv",
    "shop": "arena.envs.shop:ShopEnv",
    "alfworld": "arena.envs.alfworld:AlfworldEnv",
    "sanity": "arena.envs.sanity:SanityEnv",  # one-turn RL correctness check
}


def _module(name: str):
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; valid: {', '.join(sorted(ENVS))}")
    module, factory = ENVS[name].split(":")
    return importlib.import_module(module), factory


def make(name: str, **kwargs) -> Env:
    """Build an environment by registry name; unknown names list the valid ones."""
    module, factory = _module(name)
    return getattr(module, factory)(**kwargs)


def check_available(name: str, **kwargs) -> None:
    """Raise EnvUnavailableError (saying how to get it) when an environment's optional package
    or data is missing; cheap, builds nothing. Environment modules opt in with a module-level
    `check_available(**kwargs)`; the others are always available."""
    module, _ = _module(name)
    check = getattr(module, "check_available", None)
    if check is not None:
        check(**kwargs)


def validation_size(name: str, **kwargs) -> Optional[int]:
    """How many distinct validation episodes (BC's band stop plays training seeds
    VAL_SEED_OFFSET + i, i < bc.val_n: arena.bc.stop) the environment has.
    None: as many as asked (generated rooms, goals and problems never run out). Modules with a
    finite validation split opt in with a module-level `validation_size(**kwargs)`; beyond it a
    validation seed would play a training episode."""
    module, _ = _module(name)
    size = getattr(module, "validation_size", None)
    return None if size is None else int(size(**kwargs))


def eval_size(name: str, **kwargs) -> Optional[int]:
    """How many distinct held-out episodes eval_seed(0), eval_seed(1), ... play. None: as many as
    asked (generated rooms, goals and problems). Modules with a finite eval split (household,
    alfworld) opt in with a module-level `eval_size(**kwargs)`; past it eval_seed(i) replays
    episode i mod size, so an eval of more episodes counts repeats as new samples."""
    module, _ = _module(name)
    size = getattr(module, "eval_size", None)
    return None if size is None else int(size(**kwargs))


def first_use_notice(name: str, **kwargs) -> Optional[str]:
    """What the first run will make before it starts (e.g. household's large pool, generated once
    into the cache), or None. Cheap: a file check. Modules opt in with a module-level
    `first_use_notice(**kwargs)`; a sweep logs it up front, since its jobs' own progress lines go
    to their job logs."""
    module, _ = _module(name)
    notice = getattr(module, "first_use_notice", None)
    return None if notice is None else notice(**kwargs)


def announce_first_use(name: str, kwargs: dict, *, consent: bool, interactive: Optional[bool] = None) -> None:
    """Before a one-config command (`arena eval`, `arena envs`) makes its environment: print
    what the first use will make (first_use_notice) to stderr, up front. A non-interactive run
    (stdin not a terminal) must say it wants that (`make_pool=true`): without it,
    EnvUnavailableError (exit 2), so a script never starts a long generation by surprise."""
    import sys

    check_available(name, **kwargs)  # a bad pool name or size first, named with its valid values
    notice = first_use_notice(name, **kwargs)
    if notice is None:
        return
    interactive = sys.stdin.isatty() if interactive is None else interactive
    if not consent and not interactive:
        raise EnvUnavailableError(f"{notice}. This run is not interactive: pass make_pool=true to make it now, or "
                                  "env.kwargs.pool=committed to play the small committed pool instead")
    print(f"[{name}] {notice}", file=sys.stderr, flush=True)


__all__ = ["ENVS", "EVAL_SEED_OFFSET", "Env", "EnvUnavailableError", "announce_first_use", "check_available",
           "eval_seed", "eval_size", "first_use_notice", "is_eval_seed", "make", "validation_size"]
