"""Register a function in one of verl's registries, refusing to overwrite someone else's.

verl's `register_policy_loss` silently overwrites an existing name, and `register_adv_est`
raises only on a different function; both cases here raise a ValueError that names the
current owner and the registered names, and registering the same function again is a no-op."""
from __future__ import annotations

from typing import Callable


def register_once(registry: dict, name: str, fn: Callable, register: Callable[[str], Callable], what: str) -> None:
    current = registry.get(name)
    if current is not None and current is not fn:
        raise ValueError(f"{what} {name!r} is already registered in verl by {current!r}; registered: {sorted(registry)}")
    if current is None:
        register(name)(fn)
