"""Run untrusted (policy-written) Python code in an isolated, resource-limited process.

Per call: a fresh `python -I -S` in its own process group; where possible inside
`unshare --net --pid --ipc --fork --kill-child --mount-proc` (no network, private pid and
IPC namespaces, private size-limited tmpfs over /run and the world-writable dirs); as root,
under a dedicated unprivileged uid; Landlock (read only system dirs, write only the work
dir, no TCP, no signal or ptrace out of the sandbox) where the kernel has it; seccomp (no
unix sockets, no keyring; plain mode: no inet sockets or IPC objects either) where
libseccomp is installed; rlimits; a wall-clock timeout that SIGKILLs everything; capped
output; in plain mode a cap on what the code writes to the host's temp dir. docs/sandbox.md, "Modes", says
what each mode protects; `isolation()` says which layers run on this machine, and
`mode_in_force()` names the mode (recorded with each run).

Mode choice: `auto` takes the strongest namespace setup that works. Without namespaces it
falls back to `plain` only as root (the dedicated uid still keeps tool code away from the
trainer's secrets and processes); a non-root user must ask for `plain` explicitly
(`env.kwargs.sandbox_mode=plain`), else `SandboxUnavailable` is raised. A probe that timed
out is retried and never decides the mode.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import shutil
import sys
import threading
from typing import Any, Optional

from .sandbox_process import NOBODY, UID_POOL_BASE, Plan, SandboxResult, _execute  # noqa: F401

MODES = ("auto", "namespaces", "plain")
NS_FLAGS = ("--net", "--pid", "--ipc", "--fork", "--kill-child", "--mount-proc")
PROBE = "import json, fractions, math, decimal, itertools; print('ok')"
PROBE_TIMEOUTS = (10.0, 30.0, 60.0)  # a busy machine may start python slowly: retry, longer
ALLOW_PLAIN_SETTING = "env.kwargs.sandbox_mode=plain"
UNSHARE = shutil.which("unshare")  # None: namespaces unavailable (tests set it so)

_PLANS: dict[str, Plan] = {}
_PLAN_LOCK = threading.Lock()


class SandboxUnavailable(RuntimeError):
    """No sandbox mode that may be used for the requested mode on this machine."""


def _interpreter_candidates() -> list[str]:
    paths = (sys.executable, getattr(sys, "_base_executable", None), "/usr/bin/python3",
             "/usr/local/bin/python3", shutil.which("python3"))
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.exists(p)))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none). landlock_create_ruleset(NULL, 0, VERSION)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return max(libc.syscall(444, None, 0, 1), 0)


def _candidates(mode: str) -> list[tuple]:
    """(namespace prefix, uid drops) to try, strongest first."""
    is_root, out = os.geteuid() == 0, []
    if mode in ("auto", "namespaces") and UNSHARE:
        prefix = (UNSHARE, *NS_FLAGS) if is_root else (UNSHARE, "--map-root-user", *NS_FLAGS)
        out.append((prefix, ["pool", "nobody"] if is_root else ["none"]))
    if mode == "plain" or (mode == "auto" and is_root):
        out.append(((), ["pool", "nobody"] if is_root else ["none"]))
    return out


def _namespace_options(seccomp: list[bool]) -> list[tuple[bool, bool]]:
    """(read-only mounts, seccomp) to try under namespaces, strongest first: read-only where
    mount_setattr exists (Linux >= 5.12); seccomp where libseccomp is installed (no unix
    sockets or keyring: the namespaces cover neither)."""
    return list(itertools.product([True, False], seccomp))


def _probe(plan: Plan) -> Optional[bool]:
    """True: the plan runs a stdlib program; False: it fails; None: every try timed out."""
    for timeout in PROBE_TIMEOUTS:
        result = _execute(plan, PROBE, timeout=timeout)
        if not result.timed_out:
            return result.stdout.strip() == "ok"
    return None


def _plan(mode: str) -> Plan:
    """Probe (once per mode, caching only a success) the strongest setup that works."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; valid: {', '.join(MODES)}")
    with _PLAN_LOCK:
        if mode in _PLANS:
            return _PLANS[mode]
        landlock = [True, False] if landlock_abi() >= 1 else [False]
        seccomp = [True, False] if ctypes.util.find_library("seccomp") else [False]
        tried = []
        for prefix, drops in _candidates(mode):
            for interpreter in _interpreter_candidates():
                options = _namespace_options(seccomp) if prefix else [(False, s) for s in seccomp]
                for drop, use_landlock, (read_only, use_seccomp) in itertools.product(drops, landlock, options):
                    plan = Plan(prefix, interpreter, drop, use_landlock, use_seccomp, read_only)
                    ok = _probe(plan)
                    if ok is None:  # never fall back to a weaker plan on a timeout
                        raise SandboxUnavailable(
                            f"sandbox: probing {plan.label} with {interpreter} timed out "
                            f"{len(PROBE_TIMEOUTS)} times (machine overloaded?); nothing "
                            "was chosen, the next call probes again")
                    if ok:
                        _PLANS[mode] = plan
                        return plan
                    tried.append(plan.label)
        raise SandboxUnavailable(_refusal(mode, tried))


def _refusal(mode: str, tried: list[str]) -> str:
    if mode == "auto" and os.geteuid() != 0:
        return ("sandbox: tool code cannot be isolated with namespaces on this machine "
                f"({'unshare not found' if not UNSHARE else 'unshare --map-root-user failed'}); "
                "the plain mode runs it as your own user, where only Landlock (if the kernel has "
                "it) keeps it from the trainer's secrets and processes. To run it anyway set "
                f"{ALLOW_PLAIN_SETTING} (valid sandbox_mode values: {', '.join(MODES)}); "
                "see docs/sandbox.md, Modes")
    return (f"sandbox: no working setup for sandbox_mode={mode!r} (tried {tried or 'nothing'} "
            f"with {_interpreter_candidates()}); valid sandbox_mode values: {', '.join(MODES)}")


def isolation(mode: str = "auto") -> dict[str, Any]:
    """Which isolation layers `run_code` applies on this machine (probes on first call)."""
    plan = _plan(mode)
    return {
        "mode": plan.label,
        "network": "netns" if plan.namespace_cmd else (
            "landlock+seccomp" if plan.landlock and plan.seccomp else
            "landlock-tcp" if plan.landlock else "seccomp" if plan.seccomp else "socket_guard"),
        # pid + IPC namespaces and the private tmpfs mounts come with the network namespace
        "namespaces": [a[2:] for a in plan.namespace_cmd[1:] if a not in ("--fork", "--kill-child")],
        "uid": {"pool": "dedicated", "nobody": "nobody", "none": "unchanged"}[plan.drop_uid],
        "landlock_abi": landlock_abi() if plan.landlock else 0,
        "seccomp": plan.seccomp,
        "interpreter": plan.interpreter,
    }


def mode_in_force(mode: str = "auto") -> str:
    """The label of the mode `run_code(mode=mode)` uses, e.g. "namespaces+uid+readonly+landlock+seccomp"."""
    return _plan(mode).label


def env_isolation(env: Any) -> Optional[str]:
    """The sandbox mode in force for an environment that runs tool code (it has a
    `sandbox_mode` attribute); None for one that does not."""
    requested = getattr(env, "sandbox_mode", None)
    return None if requested is None else mode_in_force(requested)


def run_code(code: str, *, timeout: float = 5.0, mode: str = "auto", memory_mb: int = 512,
             max_processes: int = 32, file_size_mb: int = 16, open_files: int = 64,
             tmpfs_mb: int = 64, output_chars: int = 4000) -> SandboxResult:
    """Run `code` as a script in a fresh sandboxed interpreter; never raises on bad code
    (raises SandboxUnavailable when no allowed mode works on this machine)."""
    return _execute(_plan(mode), code, timeout=timeout, memory_mb=memory_mb,
                    max_processes=max_processes, file_size_mb=file_size_mb, open_files=open_files,
                    tmpfs_mb=tmpfs_mb, output_chars=output_chars)
