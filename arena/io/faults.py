"""Crash points for the kill tests (docs/design.md, Run folder): with
`ARENA_CRASH_AT=<point>:<n>` this process kills itself with SIGKILL, like a preemption or an
OOM kill, the n-th time it reaches <point>. Points are file names at the moment a crash there
hurts most: `state.pt` and `summary.json` after their temp file is written and before it is
renamed into place, `metrics.jsonl` right after a row was appended, and a folder written by
`atomic.atomic_write_dir` (`policy`, or a step number under `steps/`) before its rename.
Unset (the normal case), `crash_point` only reads one environment variable."""
from __future__ import annotations

import os
import signal

ENV = "ARENA_CRASH_AT"
_seen: dict[str, int] = {}


def crash_point(point: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.rpartition(":")
    if name != point:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)
