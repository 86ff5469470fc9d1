"""Range checks on numeric keys and the environment's kwargs, run after composition by
`arena.config.load.validate`, so `steps=-3` or `env.kwargs.dimm=7` exits 2 before any launch,
BC or write (docs/design.md, CLI grammar). Each message names the key and what is valid."""
from __future__ import annotations

import math
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from arena.envs import ENVS, EnvKwargsError, parse_kwargs

INT_AT_LEAST_1 = ("steps", "save_freq", "test_freq", "group_size", "batch_envs", "ppo_epochs", "ppo_num_mini_batches",
                  "micro_batch_size", "eval.n", "bc.demos", "bc.batch_size", "bc.eval_n",
                  "stability.min_points", "search.trials", "env.max_new_tokens", "model.vocab_size",
                  "model.max_positions")
INT_AT_LEAST_0 = ("seed", "model.init_seed", "env.history_length", "bc.steps")  # bc.steps=0: no BC
OPTIONAL_INT_AT_LEAST_1 = ("ppo_mini_batch_size", "model.hidden", "model.layers", "model.heads", "model.kv_heads",
                           "model.intermediate")
FLOAT_ABOVE_0 = ("lr", "grad_clip", "bc.lr")
FLOAT_AT_LEAST_0 = ("kl_coef", "temperature", "eval.temperature", "stability.theta", "env.penalty_coef")
FLOAT_IN_0_1 = ("top_p", "eval.top_p")  # 0 < p <= 1


class RangeError(ValueError):
    """A numeric key outside its valid range."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def non_finite_problem(node: Any, prefix: str = "") -> Optional[str]:
    """The first key of the (plain) config holding nan, or inf outside `po.hp.*`, named with the
    valid values, or None: no key of arena's takes them (`lr=inf` would train on nothing but
    nan); a member hyperparameter may use +inf for "off" (e.g. seq_mask's delta)."""
    if isinstance(node, dict):
        items = ((f"{prefix}{k}", v) for k, v in node.items())
    elif isinstance(node, list):
        items = ((f"{prefix[:-1]}[{i}]", v) for i, v in enumerate(node))
    else:
        return None
    for key, value in items:
        if isinstance(value, float) and (math.isnan(value) or (math.isinf(value) and not key.startswith("po.hp."))):
            return f"{key}={value!r} is not a finite number; valid: a finite number"
        problem = non_finite_problem(value, key + ".")
        if problem:
            return problem
    return None


def range_problem(key: str, value: Any) -> Optional[str]:
    """Why `value` is not valid for `key` (a message naming both and the valid range), or None."""
    if key in INT_AT_LEAST_1 and not (_is_int(value) and value >= 1):
        return f"{key}={value!r} is out of range; valid: an integer >= 1"
    if key in INT_AT_LEAST_0 and not (_is_int(value) and value >= 0):
        return f"{key}={value!r} is out of range; valid: an integer >= 0"
    if key in OPTIONAL_INT_AT_LEAST_1 and value is not None and not (_is_int(value) and value >= 1):
        return f"{key}={value!r} is out of range; valid: null or an integer >= 1"
    if key in FLOAT_ABOVE_0 and not (_is_number(value) and value > 0):
        return f"{key}={value!r} is out of range; valid: a number > 0"
    if key in FLOAT_AT_LEAST_0 and not (_is_number(value) and value >= 0):
        return f"{key}={value!r} is out of range; valid: a number >= 0"
    if key in FLOAT_IN_0_1 and not (_is_number(value) and 0 < value <= 1):
        return f"{key}={value!r} is out of range; valid: a number in (0, 1]"
    return None


def check_ranges(cfg: DictConfig) -> None:
    problem = non_finite_problem(OmegaConf.to_container(cfg, resolve=True))
    if problem:
        raise RangeError(problem)
    for key in INT_AT_LEAST_1 + INT_AT_LEAST_0 + OPTIONAL_INT_AT_LEAST_1 + FLOAT_ABOVE_0 + FLOAT_AT_LEAST_0 + FLOAT_IN_0_1:
        problem = range_problem(key, OmegaConf.select(cfg, key, default=None))
        if problem:
            raise RangeError(problem)
    seeds = OmegaConf.select(cfg, "search.seeds", default=None)
    if seeds is not None and not all(_is_int(s) and s >= 0 for s in seeds):
        raise RangeError(f"search.seeds={list(seeds)!r} is out of range; valid: a list of integers >= 0")


def check_env_kwargs(cfg: DictConfig) -> None:
    """RangeError unless env.kwargs are keys of the environment's kwargs dataclass with values of
    their types (arena.envs.spec: parsed as a structured config). An environment whose module
    can't be imported here (an optional extra) is checked by its constructor instead."""
    name = str(cfg.env.name)
    if name not in ENVS:
        return  # the env name's own check names the valid ones
    try:
        parse_kwargs(name, **OmegaConf.to_container(cfg.env.kwargs, resolve=True))
    except ImportError:
        return
    except EnvKwargsError as exc:
        raise RangeError(str(exc)) from exc
