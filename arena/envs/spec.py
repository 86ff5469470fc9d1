"""The environment spec: what arena knows of an environment besides the episode protocol
(`base.Env`: reset, step, is_admissible, expert_action).

Every environment module defines one `SPEC = EnvSpec(...)` (the registry, `arena.envs.ENVS`,
names the module):

- `kwargs`: a frozen dataclass with one typed field per `env.kwargs` key and its default. It is
  the one place for the defaults: the environment's constructor and every hook read them from
  it. A config's `env.kwargs` is parsed like a Hydra structured config (`OmegaConf.structured`):
  an unknown key or a value of the wrong type is an error that names the valid keys. A field
  whose metadata holds `valid(check, text)` (e.g. `AT_LEAST_ONE`, `POSITIVE`) is also range
  checked: a value outside it is an error that names the valid range (so `arena train/sweep`
  exit 2 before any job, not the job at its first episode).
- `factory(**kwargs) -> Env`: builds one environment (the constructor; it parses its keywords
  into `kwargs` itself, so a direct call gets the same defaults).
- Hooks, each optional, each given the parsed kwargs (never raw keywords, so no hook restates a
  default):
  - `check_available(kw) -> None`: raise EnvUnavailableError (saying how to get it) when an
    optional package, data or a valid value is missing; cheap, builds nothing. Absent: always
    available.
  - `validation_size(kw) -> int | None`: distinct validation episodes (BC's band stop plays
    VAL_SEED_OFFSET + i). Absent or None: as many as asked (generated tasks never run out).
  - `eval_size(kw) -> int | None`: distinct held-out episodes (eval_seed(i) plays i mod size).
    Absent or None: as many as asked.
  - `first_use_notice(kw) -> str | None`: what the first run will make before it starts (e.g.
    a pool generated once into the cache); a cheap file check.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional


class EnvKwargsError(ValueError):
    """An `env.kwargs` key the environment does not take, or a value of the wrong type or range."""


def valid(check: Callable[[Any], bool], text: str) -> dict:
    """A kwargs field's metadata: `check(value)` must hold (an exception counts as false); `text`
    names the valid values. Use: `max_turns: int = field(default=4, metadata=AT_LEAST_ONE)`."""
    return {"valid": (check, text)}


AT_LEAST_ONE = valid(lambda v: v >= 1, "an integer >= 1")
POSITIVE = valid(lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


@dataclass(frozen=True)
class EnvSpec:
    name: str  # registry name, e.g. "sokoban"
    kwargs: type  # frozen dataclass: every env.kwargs key, typed, with its default
    factory: Callable[..., Any]  # factory(**kwargs) -> Env
    check_available: Optional[Callable[[Any], None]] = None
    validation_size: Optional[Callable[[Any], Optional[int]]] = None
    eval_size: Optional[Callable[[Any], Optional[int]]] = None
    first_use_notice: Optional[Callable[[Any], Optional[str]]] = None

    def key_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.kwargs))

    def parse(self, kwargs: Mapping[str, Any]) -> Any:
        """`kwargs` as an instance of the kwargs dataclass, typed (OmegaConf converts "5" to 5
        for an int field), defaults filled in; EnvKwargsError names what is wrong and what is
        valid."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        unknown = sorted(set(kwargs) - set(self.key_names()))
        if unknown:
            raise EnvKwargsError(f"unknown env.kwargs key(s) {', '.join(unknown)} for env {self.name}; "
                                 f"valid: {', '.join(sorted(self.key_names()))}")
        try:
            merged = OmegaConf.merge(OmegaConf.structured(self.kwargs), dict(kwargs))
            parsed = OmegaConf.to_object(merged)
        except OmegaConfBaseException as err:
            key = str(getattr(err, "full_key", "") or "").split(".")[0]
            expected = {f.name: f.type for f in dataclasses.fields(self.kwargs)}.get(key, "?")
            raise EnvKwargsError(f"env.kwargs.{key}={kwargs.get(key)!r} for env {self.name}: "
                                 f"{str(err).splitlines()[0]}; valid: a value of type {expected}") from err
        self.check_ranges(parsed)
        return parsed

    def check_ranges(self, parsed: Any) -> None:
        """EnvKwargsError for the first field whose value is outside its `valid` range."""
        for f in dataclasses.fields(self.kwargs):
            if "valid" not in f.metadata:
                continue
            check, text = f.metadata["valid"]
            value = getattr(parsed, f.name)
            try:
                ok = bool(check(value))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise EnvKwargsError(f"env.kwargs.{f.name}={value!r} for env {self.name}; valid: {text}")
