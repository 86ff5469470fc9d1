"""Every ARENA_* environment variable arena reads, in one table (docs/design.md, Environment
variables), checked by every `arena` verb before it does anything (`check_environment`):

- a bad value is bad input: exit 2 naming the variable and its valid range (an empty value
  counts as unset, as everywhere arena reads these);
- a test hook (a variable made for the test suite, e.g. ARENA_CRASH_AT) that is set prints a
  loud notice, and `active_test_hooks()` is recorded in every summary.json (`test_hooks`);
- a hand-off (a variable arena sets for its own child processes, e.g. the commit a sweep
  driver recorded) found in the environment of an `arena` command came from the user's
  shell, not from arena: it is removed with a notice, so it cannot replace what the run
  records;
- an unknown ARENA_* name is a warning with the closest known names (a typo'd setting would
  otherwise do nothing, silently). Values of unknown names are never printed (one may be a key).
"""
from __future__ import annotations

import difflib
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, MutableMapping, Optional

SETTING, TEST_HOOK, HAND_OFF, TEST_SUITE = "setting", "test hook", "hand-off", "test suite"


def _int_at_least(low: int) -> Callable[[str], bool]:
    return lambda v: v.strip().lstrip("-").isdigit() and int(v) >= low


def _number_in(low: float, high: float) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            x = float(v)
        except ValueError:
            return False
        return math.isfinite(x) and low <= x <= high
    return check


def _dirs(v: str) -> bool:
    return all(os.path.isdir(os.path.expanduser(p)) for p in v.split(os.pathsep) if p)


def _crash_spec(v: str) -> bool:
    name, _, nth = v.rpartition(":")
    return bool(name) and nth.isdigit() and int(nth) >= 1


@dataclass(frozen=True)
class EnvVar:
    name: str
    kind: str  # SETTING | TEST_HOOK | HAND_OFF | TEST_SUITE
    valid: str  # the valid values, in words (the exit-2 message)
    check: Callable[[str], bool]
    meaning: str


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar("ARENA_CONFIG_DIR", SETTING, "an existing directory", os.path.isdir, "the configs/ folder to compose from"),
    EnvVar("ARENA_CACHE", SETTING, "a non-empty path", bool, "cache root for household pools (default ~/.cache/arena)"),
    EnvVar("ARENA_GRIDS", SETTING, f"existing directories separated by {os.pathsep!r}", _dirs,
           "extra sweep grid folders, searched before the shipped grids (a shadowing grid is announced)"),
    EnvVar("ARENA_MAX_PARALLEL", SETTING, "an integer >= 1", _int_at_least(1), "cap on jobs at once (local launcher)"),
    EnvVar("ARENA_HEARTBEAT_S", SETTING, "a number in [0.1, 3600]", _number_in(0.1, 3600.0),
           "seconds between a running cell's heartbeats (a holder is live for 3 of them)"),
    EnvVar("ARENA_MALLOC_TUNING", SETTING, "0 or 1", lambda v: v.strip() in ("0", "1"),
           "1 (default): keep freed memory instead of faulting it in again (arena/malloc_tuning.py); 0: glibc's defaults"),
    EnvVar("ARENA_VERL_GPUS_PER_NODE", SETTING, "an integer >= 0", _int_at_least(0), "GPUs per node (multi-node script)"),
    EnvVar("ARENA_VERL_NNODES", SETTING, "an integer >= 1", _int_at_least(1), "nodes of a verl run (multi-node script)"),
    EnvVar("ARENA_CRASH_AT", TEST_HOOK, "<point>:<n>, n >= 1 (e.g. summary.json:1)", _crash_spec,
           "SIGKILL this process the n-th time it reaches <point> (kill tests)"),
    EnvVar("ARENA_VERL_DUMP_TURNS", TEST_HOOK, "a directory path", bool, "save each verl step's turns there (tests)"),
    EnvVar("ARENA_GIT_SHA", HAND_OFF, "a 40-digit hex commit or empty", lambda v: v == "" or bool(
        re.fullmatch(r"[0-9a-f]{40}", v)), "the commit a sweep driver recorded, for its jobs"),
    EnvVar("ARENA_GIT_DIRTY", HAND_OFF, "0 or 1", lambda v: v in ("0", "1"), "the driver's checkout was dirty"),
    EnvVar("ARENA_COMMAND", HAND_OFF, "a command line", bool, "the command a sweep driver ran, for its jobs' command.txt"),
    EnvVar("ARENA_RUN_DIR", HAND_OFF, "a path", bool, "the run folder, for verl's task runner"),
    EnvVar("ARENA_TEST_SEED", TEST_SUITE, "anything", lambda v: True, "read by the test suite only"),
    EnvVar("ARENA_UPDATE_GOLDEN", TEST_SUITE, "anything", lambda v: True, "read by the test suite only"),
    EnvVar("ARENA_SLURM_BASE", TEST_SUITE, "anything", lambda v: True, "read by the test suite's SLURM scripts"),
)
BY_NAME = {v.name: v for v in ENV_VARS}


class BadEnvironment(ValueError):
    """An ARENA_* variable with a value outside its valid range (exit 2)."""


def active_test_hooks(environ: Optional[MutableMapping[str, str]] = None) -> dict[str, str]:
    """{name: value} of the test hooks set now (recorded in summary.json as `test_hooks`)."""
    environ = os.environ if environ is None else environ
    return {v.name: environ[v.name] for v in ENV_VARS if v.kind == TEST_HOOK and environ.get(v.name)}


def check_environment(environ: Optional[MutableMapping[str, str]] = None, *, ignore: tuple[str, ...] = (),
                      warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> None:
    """The module docstring's checks, for an `arena` command at its start: raises BadEnvironment;
    removes hand-offs from `environ`; names in `ignore` (e.g. the key variable an eval was told
    to read) are not warned about."""
    environ = os.environ if environ is None else environ
    for name in sorted(n for n in environ if n.startswith("ARENA_")):
        var, value = BY_NAME.get(name), environ[name]
        if var is None:
            if name not in ignore:
                close = difflib.get_close_matches(name, BY_NAME, n=2, cutoff=0.7)
                hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(BY_NAME)}"
                warn(f"arena: warning: unknown environment variable {name} is ignored{hint}")
        elif value == "" and var.kind != HAND_OFF:
            continue  # set but empty: the same as unset, where each is read
        elif var.kind == HAND_OFF:
            del environ[name]
            warn(f"arena: NOTICE: {name} is set in this shell; arena sets it only for its own child processes "
                 f"({var.meaning}). It is ignored here (removed), so it cannot change what this run records.")
        elif not var.check(value):
            raise BadEnvironment(f"{name}={value!r}: valid: {var.valid} ({var.meaning})")
        elif var.kind == TEST_HOOK:
            warn(f"arena: NOTICE: TEST HOOK {name}={value} is set: {var.meaning}. This is for arena's tests, not "
                 "for real runs; summary.json records it under test_hooks. Unset it unless you mean it.")
