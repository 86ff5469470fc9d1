"""One registry class for every dimension: a member is a function, its hyperparameters are
its defaulted keyword arguments, and what it reads from the per-turn batch is declared next to
it with `@reads(...)` (docs/design.md, Config paths and resolution order).

Both backends derive everything from here: the composer checks `po.hp.*` against
`Registry.hyperparameters`; the verl adapter passes the whole resolved PO
(`ResolvedPO.to_dict()`, with exactly those keys) in verl's `actor.policy_loss.po` and requires
exactly `Registry.reads` of the chosen advantage. So a new member is one function in
one registry (plus, for a method, one preset line in `arena/po/methods.py`).

Errors have one format:
    unknown <dimension> '<name>'; valid: a, b, c           (sorted)
    unknown hyperparameter(s) ['x'] for <dimension>=<name>; valid: p, q
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Mapping

Member = Callable[..., Any]


# The Python types a hyperparameter of each annotation accepts (bool is an int in Python: it
# is refused where a number is meant, by hp_type_problem).
HP_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,)}
HP_TYPE_WORDS = {"float": "a number", "int": "an integer", "bool": "true or false", "str": "a string"}


class UnknownMember(ValueError, KeyError):
    """A name that is not in a registry (a ValueError for callers, a KeyError for dict users)."""

    __str__ = Exception.__str__  # KeyError would quote the whole message


def reads(*fields: str) -> Callable[[Member], Member]:
    """Declare the per-turn batch fields (TurnBatch names) a member reads."""

    def mark(fn: Member) -> Member:
        fn.reads = tuple(fields)
        return fn

    return mark


class Registry(dict):
    """name -> member function of one dimension, in registration order.

    `runtime_args`: defaulted keyword arguments that the caller supplies at run time (for
    example the aggregation's `norm`), so they are not hyperparameters."""

    def __init__(self, dimension: str, members: Mapping[str, Member], *, runtime_args: Iterable[str] = ()):
        super().__init__(members)
        self.dimension = dimension
        self.runtime_args = frozenset(runtime_args)

    def __missing__(self, name: str) -> Member:
        raise UnknownMember(f"unknown {self.dimension} {name!r}; valid: {', '.join(sorted(self))}")

    def member(self, name: str) -> Member:
        """The function registered under `name` (UnknownMember lists the valid names)."""
        return self[name]

    def hyperparameters(self, name: str) -> dict[str, Any]:
        """name's hyperparameters and their defaults: its defaulted parameters minus runtime_args."""
        params = inspect.signature(self[name]).parameters.values()
        return {p.name: p.default for p in params if p.default is not p.empty and p.name not in self.runtime_args}

    def reads(self, name: str) -> tuple[str, ...]:
        """The per-turn batch fields name declared with `@reads` (empty when it declared none)."""
        return tuple(getattr(self[name], "reads", ()))

    def check_hp(self, name: str, hp: Mapping[str, Any]) -> None:
        """ValueError naming the keys of `hp` that are not hyperparameters of `name`."""
        valid = self.hyperparameters(name)
        bad = sorted(set(hp) - set(valid))
        if bad:
            raise ValueError(
                f"unknown hyperparameter(s) {bad} for {self.dimension}={name}; valid: {', '.join(valid) or '(none)'}"
            )

    def hp_type_problem(self, name: str, key: str, value: Any) -> str | None:
        """Why `value` does not fit hyperparameter `key` of `name`, judged by its annotation
        (`eps_high: float = 0.2`), or by its default's type when it has none; None when it fits.
        An int fits a float; a bool fits only a bool."""
        param = inspect.signature(self[name]).parameters[key]
        kind = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
        if kind not in HP_TYPES and param.default is not None:
            kind = type(param.default).__name__
        allowed = HP_TYPES.get(kind)
        if allowed is None or (isinstance(value, allowed) and (kind == "bool" or not isinstance(value, bool))):
            return None
        return f"po.hp.{key}={value!r} is not {HP_TYPE_WORDS[kind]} ({self.dimension}={name} takes {key}: {kind})"

    def with_defaults(self, name: str, hp: Mapping[str, Any]) -> dict[str, Any]:
        """name's hyperparameters: its defaults overridden by `hp` (unknown keys raise)."""
        self.check_hp(name, hp)
        return {**self.hyperparameters(name), **hp}
