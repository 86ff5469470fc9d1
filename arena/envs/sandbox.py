"""Run untrusted (policy-written) Python code in an isolated, resource-limited process.

Per call: a fresh `python -I -S` in its own process group; where possible inside
`unshare --net --pid --fork --kill-child --mount-proc` (no network, private pid namespace,
private size-limited tmpfs over the world-writable dirs); as root, under a dedicated
unprivileged uid; rlimits (CPU, address space, processes, file size, open files); a
wall-clock timeout that SIGKILLs everything; capped output. Without namespaces a weaker
socket guard replaces the network namespace. docs/sandbox.md has the details;
`isolation()` says which layers run on this machine.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Optional

MODES = ("auto", "namespaces", "plain")
UID_POOL_BASE = 1_500_000_000  # dedicated sandbox uids: UID_POOL_BASE + slot (no passwd entry)
UID_POOL_SIZE = 256
NOBODY = 65534
NS_ROOT = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
PRIVATE_TMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"]
NS_WORK_DIR = "/tmp/work"


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    returncode: Optional[int]  # negative: killed by that signal (subprocess convention)
    timed_out: bool  # the wall-clock timeout fired and the process group was SIGKILLed
    killed: bool  # timed out, or ended by a signal (e.g. the CPU rlimit's SIGKILL)
    uid: Optional[int] = None  # the uid the code ran as (None: unchanged)


@dataclass(frozen=True)
class _Plan:
    namespace_cmd: tuple  # unshare prefix, () when none
    interpreter: str
    drop_uid: str  # "pool" | "nobody" | "none"
    socket_guard: bool


_PLANS: dict = {}
_PLAN_LOCK = threading.Lock()


def _interpreter_candidates() -> list[str]:
    paths = (sys.executable, getattr(sys, "_base_executable", None), "/usr/bin/python3",
             "/usr/local/bin/python3", shutil.which("python3"))
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.exists(p)))


def _plan(mode: str) -> _Plan:
    """Probe (once per mode) the strongest setup that runs a stdlib-importing program."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; valid: {', '.join(MODES)}")
    with _PLAN_LOCK:
        if mode in _PLANS:
            return _PLANS[mode]
        is_root, unshare, prefixes = os.geteuid() == 0, shutil.which("unshare"), []
        if mode in ("auto", "namespaces") and unshare:
            prefixes.append((unshare, *NS_ROOT) if is_root else (unshare, "--map-root-user", *NS_ROOT))
        if mode in ("auto", "plain"):
            prefixes.append(())
        drops = ["pool", "nobody"] if is_root else ["none"]
        probe = "import json, fractions, math, decimal, itertools; print('ok')"
        for prefix in prefixes:
            for interpreter in _interpreter_candidates():
                for drop in drops:
                    plan = _Plan(prefix, interpreter, drop, socket_guard=not prefix)
                    if _execute(plan, probe, timeout=10.0).stdout.strip() == "ok":
                        _PLANS[mode] = plan
                        return plan
        raise RuntimeError(f"sandbox: no working setup for mode {mode!r} "
                           f"(tried {[p[1:] for p in prefixes]} x {_interpreter_candidates()})")


def isolation(mode: str = "auto") -> dict:
    """Which isolation layers `run_code` applies on this machine (probes on first call)."""
    plan = _plan(mode)
    return {
        "network": "netns" if plan.namespace_cmd else "socket_guard",
        # pid namespace + private tmpfs mounts come with the network namespace
        "namespaces": [a[2:] for a in plan.namespace_cmd[1:] if a not in ("--fork", "--kill-child")],
        "uid": {"pool": "dedicated", "nobody": "nobody", "none": "unchanged"}[plan.drop_uid],
        "interpreter": plan.interpreter,
    }


def run_code(code: str, *, timeout: float = 5.0, mode: str = "auto", memory_mb: int = 512,
             max_processes: int = 32, file_size_mb: int = 16, open_files: int = 64,
             tmpfs_mb: int = 64, output_chars: int = 4000) -> SandboxResult:
    """Run `code` as a script in a fresh sandboxed interpreter; never raises on bad code."""
    return _execute(_plan(mode), code, timeout=timeout, memory_mb=memory_mb,
                    max_processes=max_processes, file_size_mb=file_size_mb, open_files=open_files,
                    tmpfs_mb=tmpfs_mb, output_chars=output_chars)


def _acquire_uid(plan: _Plan) -> tuple[Optional[int], Optional[socket.socket]]:
    """The uid to run as; for a pool uid also its cross-process lock (an abstract socket name)."""
    if plan.drop_uid != "pool":
        return (NOBODY if plan.drop_uid == "nobody" else None), None
    for uid in range(UID_POOL_BASE, UID_POOL_BASE + UID_POOL_SIZE):
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0arena-sandbox-uid-{uid}")
            return uid, lock
        except OSError:
            lock.close()
    raise RuntimeError("sandbox: all pool uids are busy")


def processes_of_uid(uid: int) -> dict[int, int]:
    """{pid: thread count} of the live (not zombie) processes whose real uid is `uid`."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] != "Z":
            found[int(entry)] = int(fields["Threads"])
    return found


def _kill_uid(uid: int, interpreter: str) -> None:
    """SIGKILL every process of `uid`: a helper that becomes `uid` and calls kill(-1, SIGKILL)
    (atomic with respect to fork), repeated until /proc shows none left."""
    script = f"import os; os.setgroups([]); os.setgid({uid}); os.setuid({uid}); os.kill(-1, 9)"
    for _ in range(20):
        if not processes_of_uid(uid):
            return
        subprocess.run([interpreter, "-I", "-S", "-c", script], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        time.sleep(0.01)


def _kill_all(proc: subprocess.Popen, plan: _Plan, uid: Optional[int]) -> None:
    """SIGKILL everything the call started (the leader stays an unreaped zombie, so its pgid
    cannot be reused meanwhile): under `unshare --fork` first its child, the pid namespace's
    init (its death kills the namespace, and `unshare` reaps it: no orphaned zombie); then
    the process group; then, for a pool uid, every process of that uid (`setsid` escapes)."""
    if plan.namespace_cmd:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                for child in f.read().split():
                    _signal(os.kill, int(child))
        except OSError:
            pass
        start = time.monotonic()  # let unshare reap its child and exit
        while time.monotonic() - start < 2.0 and not _exited(proc):
            time.sleep(0.005)
    _signal(os.killpg, proc.pid)
    if uid is not None and plan.drop_uid == "pool":
        _kill_uid(uid, plan.interpreter)


def _signal(kill, pid: int) -> None:
    try:
        kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(proc: subprocess.Popen) -> bool:  # without reaping it (WNOWAIT)
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _execute(plan: _Plan, code: str, *, timeout: float, memory_mb: int = 512,
             max_processes: int = 32, file_size_mb: int = 16, open_files: int = 64,
             tmpfs_mb: int = 64, output_chars: int = 4000) -> SandboxResult:
    uid, uid_lock, host_dir = *_acquire_uid(plan), None
    try:
        host_dir = tempfile.mkdtemp(prefix="arena-sandbox-")
        code_path = os.path.join(host_dir, "main.py")
        with open(code_path, "w", encoding="utf-8") as f:
            f.write(code)
        # CPU seconds: the wall timeout rounded up, plus one (hard limit one more -> SIGKILL)
        cpu = int(timeout) + 1
        # RLIMIT_NPROC counts every task (thread) of the real uid: allow max_processes more
        # than the uid runs now (0 for a pool uid; the caller's own tasks when unchanged)
        nproc = max_processes + sum(processes_of_uid(os.getuid() if uid is None else uid).values())
        config = {
            "code_path": code_path,
            "work_dir": NS_WORK_DIR if plan.namespace_cmd else host_dir,
            "tmpfs": PRIVATE_TMP_DIRS if plan.namespace_cmd else [],
            "tmpfs_options": f"size={tmpfs_mb}m,nr_inodes=4096,mode=1777",
            "uid": uid,
            "socket_guard": plan.socket_guard,
            "rlimits": {
                "RLIMIT_CPU": [cpu, cpu + 1],
                "RLIMIT_AS": [memory_mb << 20] * 2,
                "RLIMIT_NPROC": [nproc] * 2,
                "RLIMIT_FSIZE": [file_size_mb << 20] * 2,
                "RLIMIT_NOFILE": [open_files] * 2,
                "RLIMIT_CORE": [0, 0],
            },
        }
        cmd = [*plan.namespace_cmd, plan.interpreter, "-I", "-S", "-c", BOOTSTRAP, json.dumps(config)]
        proc = subprocess.Popen(cmd, cwd=host_dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        try:  # 4 bytes per char: utf-8's maximum
            stdout, stderr, timed_out = _read_capped(proc, timeout, 4 * output_chars,
                                                     lambda: _kill_all(proc, plan, uid))
        finally:
            _kill_all(proc, plan, uid)
            returncode = proc.wait()
            proc.stdout.close(), proc.stderr.close()
        stdout, stderr = (text.decode("utf-8", "replace")[:output_chars] for text in (stdout, stderr))
        return SandboxResult(stdout, stderr, returncode, timed_out, timed_out or returncode < 0,
                             uid)
    finally:
        if host_dir is not None:
            shutil.rmtree(host_dir, ignore_errors=True)
        if uid_lock is not None:
            uid_lock.close()


def _read_capped(proc, timeout, limit, kill_all) -> tuple[bytes, bytes, bool]:
    """Read both pipes (keeping `limit` bytes each, discarding the rest) until EOF; at the
    deadline, or once the leader exits, kill everything; stop 1 s after that regardless."""
    chunks = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    selector = selectors.DefaultSelector()
    for fd in chunks:
        selector.register(fd, selectors.EVENT_READ)
    deadline, killed_at, timed_out = time.monotonic() + timeout, None, False
    while selector.get_map():
        now = time.monotonic()
        if killed_at is None and (now > deadline or _exited(proc)):
            timed_out = now > deadline and not _exited(proc)
            kill_all()
            killed_at = time.monotonic()
        if killed_at is not None and now > killed_at + 1.0:
            break  # something unkillable still holds a pipe; stop reading
        for key, _ in selector.select(timeout=0.05):
            data = os.read(key.fd, 65536)
            if not data:
                selector.unregister(key.fd)
            elif len(chunks[key.fd]) < limit:
                chunks[key.fd] += data[: limit - len(chunks[key.fd])]
    selector.close()
    out_fd, err_fd = chunks
    return bytes(chunks[out_fd]), bytes(chunks[err_fd]), timed_out


# Runs first in the fresh interpreter (as root when started as root): read the code, mount the
# private tmpfs dirs, set rlimits, drop to the sandbox uid, block sockets if asked, run the code.
BOOTSTRAP = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
with open(cfg["code_path"], encoding="utf-8") as f:
    code = f.read()
libc = ctypes.CDLL(None, use_errno=True)
for target in cfg["tmpfs"]:
    if os.path.isdir(target) and libc.mount(b"tmpfs", target.encode(), b"tmpfs", 2 | 4,
                                            cfg["tmpfs_options"].encode()) != 0:
        raise OSError(ctypes.get_errno(), "sandbox: cannot mount tmpfs on " + target)
work, uid = cfg["work_dir"], cfg["uid"]
os.makedirs(work, exist_ok=True)
if uid is not None:
    os.chown(work, uid, uid)
os.chmod(work, 0o700)
os.chdir(work)
for name, limits in cfg["rlimits"].items():
    resource.setrlimit(getattr(resource, name), tuple(limits))
if uid is not None:  # groups first: after setuid the process may not change them
    os.setgroups([]), os.setgid(uid), os.setuid(uid)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid binaries cannot gain privileges
os.environ.clear()
os.environ.update(HOME=work, TMPDIR=work, PATH="/usr/bin:/bin", LANG="C.UTF-8")
sys.argv = ["main.py"]
if cfg["socket_guard"]:
    for mod in ("socket", "_socket", "ctypes", "_ctypes", "ssl", "_ssl"):
        sys.modules[mod] = None
del libc, ctypes, cfg, f, json, resource
import linecache
linecache.cache["<tool>"] = (len(code), None, code.splitlines(True), "<tool>")
try:
    exec(compile(code, "<tool>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    raise SystemExit(1)
"""
