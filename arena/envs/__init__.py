"""Environment registry: `arena.envs.make(name, **kwargs)`; what each environment declares is its
`SPEC` (arena.envs.spec, docs/design.md "Environments").

Modules are imported lazily so that `import arena.envs` stays cheap and an optional extra
(alfworld) is needed only when its environment is made.
"""
from __future__ import annotations

import importlib
from typing import Optional

from .base import EVAL_SEED_OFFSET, Env, EnvUnavailableError, eval_seed, is_eval_seed
from .spec import EnvKwargsError, EnvSpec

# name -> the module that defines the environment's SPEC (arena.envs.spec.EnvSpec)
ENVS = {
    "sokoban": "arena.envs.sokoban",
    "tir_math": "arena.envs.tir_math",
    "household": "arena.envs.household",
    "shop": "arena.envs.shop",
    "alfworld": "arena.envs.alfworld",
    "sanity": "arena.envs.sanity",  # one-turn RL correctness check
}


def spec(name: str) -> EnvSpec:
    """The environment's spec (its typed kwargs, factory and hooks); unknown names list the
    valid ones."""
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; valid: {', '.join(sorted(ENVS))}")
    return importlib.import_module(ENVS[name]).SPEC


def make(name: str, **kwargs) -> Env:
    """Build an environment by registry name; unknown names list the valid ones."""
    return spec(name).factory(**kwargs)


def parse_kwargs(name: str, **kwargs):
    """The environment's kwargs dataclass from `kwargs`, typed and with its defaults;
    EnvKwargsError names an unknown key or a wrong type, and the valid keys."""
    return spec(name).parse(kwargs)


def check_available(name: str, **kwargs) -> None:
    """Raise EnvUnavailableError (saying how to get it) when an environment's optional package
    or data is missing, or EnvKwargsError for a bad key; cheap, builds nothing."""
    env = spec(name)
    kw = env.parse(kwargs)
    if env.check_available is not None:
        env.check_available(kw)


def validation_size(name: str, **kwargs) -> Optional[int]:
    """How many distinct validation episodes (BC's band stop plays training seeds
    VAL_SEED_OFFSET + i, i < bc.val_n: arena.bc.stop) the environment has.
    None: as many as asked (generated rooms, goals and problems never run out); beyond a finite
    split a validation seed would play a training episode."""
    env = spec(name)
    size = None if env.validation_size is None else env.validation_size(env.parse(kwargs))
    return None if size is None else int(size)


def eval_size(name: str, **kwargs) -> Optional[int]:
    """How many distinct held-out episodes eval_seed(0), eval_seed(1), ... play. None: as many as
    asked (generated rooms, goals and problems). Past a finite split (household, alfworld)
    eval_seed(i) replays episode i mod size, so an eval of more episodes counts repeats as new
    samples."""
    env = spec(name)
    size = None if env.eval_size is None else env.eval_size(env.parse(kwargs))
    return None if size is None else int(size)


def first_use_notice(name: str, **kwargs) -> Optional[str]:
    """What the first run will make before it starts (e.g. household's large pool, generated once
    into the cache), or None. Cheap: a file check. A sweep logs it up front, since its jobs' own
    progress lines go to their job logs."""
    env = spec(name)
    return None if env.first_use_notice is None else env.first_use_notice(env.parse(kwargs))


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


__all__ = ["ENVS", "EVAL_SEED_OFFSET", "Env", "EnvKwargsError", "EnvSpec", "EnvUnavailableError", "announce_first_use",
           "check_available", "eval_seed", "eval_size", "first_use_notice", "is_eval_seed", "make", "parse_kwargs",
           "spec", "validation_size"]
