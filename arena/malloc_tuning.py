"""glibc malloc settings that stop an arena process from giving memory back to the kernel and
faulting it in again (docs/testbed.md, "Memory kept, not faulted in again").

Why: with glibc's defaults a block of 128 KiB or more (an activation of a few thousand tokens)
is a fresh mapping (mmap) of its own, and freed memory at the top of the heap goes back to the
kernel (trim) once it exceeds the trim threshold. glibc raises both thresholds as it sees larger
blocks freed (the mmap threshold to the largest such block, the trim threshold to twice that: a
few MiB here), but a sampler call frees its ~24 MiB KV cache and its prefill activations at its
end, an eval's turns and the update's micro-batches change shape, so memory keeps going back and
coming in again as zeroed pages, one minor page fault per 4 KiB page on its first touch:
20,000-30,000 faults (~100 MiB) per call of benchmarks/bench_sampler.py's batch, 58,000-73,000
per Sokoban eval of 256 rooms (about 2 us each on the CI-kind machine). The settings below keep
what a process has used:
    M_MMAP_THRESHOLD = 32 MiB   blocks below it come from the heap (32 MiB is the most glibc's own
                                dynamic threshold may reach on 64-bit; setting it fixes it there)
    M_TRIM_THRESHOLD = 1 GiB    free memory at the heap's top is kept up to 1 GiB
    M_TOP_PAD        = 64 MiB   the heap grows 64 MiB beyond each request
so a process's heap stays near its peak. Setting any one of them stops glibc's dynamic
adjustment of both thresholds, which is why the mmap threshold is set too: the trim threshold
alone left every block above 128 KiB a fresh mapping (125,000 faults a sampler call). The results do not change (the allocator decides where
tensors live, not what is computed); the cost is memory held after a peak.

`tune_malloc` runs at the start of every `arena` verb (arena/cli.py) and of every sweep job
(arena/sweeps/job.py); benchmarks call it to time arena's paths as arena runs them.
ARENA_MALLOC_TUNING=0 leaves glibc's defaults (benchmarks/bench_malloc.py compares the two).
Elsewhere than Linux with glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import os

# mallopt parameter numbers from glibc's malloc.h
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MIB = 1 << 20
SETTINGS = ((M_MMAP_THRESHOLD, 32 * MIB), (M_TRIM_THRESHOLD, 1024 * MIB), (M_TOP_PAD, 64 * MIB))
SWITCH = "ARENA_MALLOC_TUNING"  # "0": glibc's defaults (arena/env_vars.py)

_applied = False


def wanted(environ=None) -> bool:
    """Whether this process should tune: yes unless ARENA_MALLOC_TUNING=0 (empty counts as unset)."""
    environ = os.environ if environ is None else environ
    return environ.get(SWITCH, "").strip() != "0"


def glibc() -> bool:
    """Whether this process runs on glibc (the only C library whose mallopt takes SETTINGS)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no confstr, or not a GNU C library
        return False


def tune_malloc(environ=None) -> bool:
    """Apply SETTINGS once per process; True when they are in force (now or from an earlier call)."""
    global _applied
    if _applied:
        return True
    if not wanted(environ) or not glibc():
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _applied = all(mallopt(param, value) == 1 for param, value in SETTINGS)  # mallopt returns 1 on success
    return _applied
