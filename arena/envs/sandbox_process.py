"""One sandboxed call: start `python -I -S` with the child bootstrap (arena/envs/sandbox_child.py)
under the plan's namespaces, read its capped output until it ends or times out, then kill
everything it started and remove what it left (work dir; for a pool uid its processes and
SysV IPC objects). docs/sandbox.md, "Layers", describes each step. What a pool uid leaves, and
its removal, is arena/envs/sandbox_uid_cleanup.py.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .sandbox_uid_cleanup import (KEYCTL_SYSCALL, entries_of_uid, forget_state_of_uid, kill_uid, processes_of_uid,
                                  remove_sysv_ipc_of_uid, remove_temp_files_of_uid)

UID_POOL_BASE = 1_500_000_000  # dedicated sandbox uids: UID_POOL_BASE + slot (no passwd entry)
UID_POOL_SIZE = 256
NOBODY = 65534
# namespace modes: a private tmpfs over each (/run first: /dev/shm may link into it). /run
# holds the host's unix sockets (D-Bus, systemd, /run/user/<uid>, docker.sock; /var/run links
# to it, or is a dir of its own on older systems), /tmp the X11 ones; the rest are the shared
# writable dirs
PRIVATE_TMP_DIRS = ["/run", "/tmp", "/var/tmp", "/dev/shm"] + ([] if os.path.islink("/var/run") else ["/var/run"])
NS_WORK_DIR = "/tmp/work"
TMPFS_INODES = 4096  # files per private tmpfs; plain mode: files the code may leave on the host
WATCH_INTERVAL_S = 0.05  # plain mode: how often what the code wrote to the host is measured
BOOTSTRAP = (Path(__file__).parent / "sandbox_child.py").read_text(encoding="utf-8")
# seccomp comparisons (libseccomp's enum scmp_compare): (arg & a) == b. Every rule is a masked
# compare: the kernel reads socket()'s family and type as 32-bit ints, while seccomp sees the
# whole 64-bit register, so a plain `arg == a` misses `family | 1 << 32`
CMP_MASKED_EQ = 7
LOW_32_BITS = 0xFFFFFFFF  # the int the kernel reads out of a 64-bit argument
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40
SOCK_DGRAM, SOCK_TYPE_MASK = 2, 0xF  # socket type, below the SOCK_NONBLOCK/SOCK_CLOEXEC bits
KEYRING_CALLS = ("add_key", "keyctl", "request_key")
IO_URING_CALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")  # socket/connect past seccomp


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    returncode: Optional[int]  # negative: killed by that signal (subprocess convention)
    timed_out: bool  # the wall-clock timeout fired and the process group was SIGKILLed
    killed: bool  # timed out, or ended by a signal (e.g. the CPU rlimit's SIGKILL)
    uid: Optional[int] = None  # the uid the code ran as (None: unchanged)


@dataclass(frozen=True)
class Plan:
    """One way to run tool code, chosen by probing (arena/envs/sandbox.py)."""
    namespace_cmd: tuple  # unshare prefix, () when none
    interpreter: str
    drop_uid: str  # "pool" | "nobody" | "none"
    landlock: bool  # Landlock restriction applied in the child
    seccomp: bool  # seccomp filter (`seccomp_rules`: no unix sockets, no keyring, ...)
    read_only: bool = False  # namespaces: every mount read-only (mount_setattr, Linux >= 5.12)

    @property
    def kind(self) -> str:
        if not self.namespace_cmd:
            return "plain"
        return "user-namespaces" if "--map-root-user" in self.namespace_cmd else "namespaces"

    @property
    def label(self) -> str:
        """The mode in force, e.g. "namespaces+uid+readonly+landlock+seccomp" (recorded with each run)."""
        extras = [name for name, on in (("uid", self.drop_uid != "none"), ("readonly", self.read_only),
                                         ("landlock", self.landlock), ("seccomp", self.seccomp)) if on]
        return "+".join([self.kind, *extras])


def seccomp_rules(plan: Plan) -> list:
    """What the seccomp filter refuses (EACCES), as [syscall, [[arg, comparison, a, b], ...]].
    Every mode: socket(AF_UNIX) (host sockets at any path: D-Bus, systemd, docker) and
    socket(AF_VSOCK) (the hypervisor; no network namespace covers it); a datagram
    socketpair (sendmsg may name any unix socket path; stream pairs ignore it, so asyncio
    and multiprocessing keep theirs); the kernel keyring, which outlives the call per uid;
    io_uring, which makes sockets without the socket syscall. Plain mode, which has no
    network or IPC namespace, also: inet, netlink (the host's interfaces, addresses and routes) and
    packet sockets, SysV IPC, POSIX message queues.
    The family is compared on its low 32 bits ((arg & 0xFFFFFFFF) == family), which is all the
    kernel reads; the socketpair type on its low 4 (the type without SOCK_NONBLOCK/CLOEXEC)."""
    families = [AF_UNIX, AF_VSOCK] + ([] if plan.namespace_cmd else [AF_INET, AF_INET6, AF_NETLINK, AF_PACKET])
    rules = [["socket", [[0, CMP_MASKED_EQ, LOW_32_BITS, family]]] for family in families]
    rules.append(["socketpair", [[1, CMP_MASKED_EQ, SOCK_TYPE_MASK, SOCK_DGRAM]]])
    calls = [*KEYRING_CALLS, *IO_URING_CALLS]
    if not plan.namespace_cmd:
        calls += ["shmget", "msgget", "semget", "mq_open"]
    return rules + [[name, []] for name in calls]


def _acquire_uid(plan: Plan) -> tuple[Optional[int], Optional[socket.socket]]:
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


def _kill_all(proc: subprocess.Popen, plan: Plan, uid: Optional[int]) -> None:
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
        kill_uid(uid, plan.interpreter)


def _signal(kill, pid: int) -> None:
    try:
        kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(proc: subprocess.Popen) -> bool:  # without reaping it (WNOWAIT)
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _execute(plan: Plan, code: str, *, timeout: float, memory_mb: int = 512,
             max_processes: int = 32, file_size_mb: int = 16, open_files: int = 64,
             tmpfs_mb: int = 64, output_chars: int = 4000) -> SandboxResult:
    try:
        source = code.encode("utf-8")
    except UnicodeEncodeError as exc:  # e.g. a lone surrogate: an error result, never a raise
        return SandboxResult("", f"SyntaxError: the code is not valid UTF-8 ({exc.reason} at "
                             f"character {exc.start})\n", 1, False, False, None)
    uid, uid_lock, host_dir = *_acquire_uid(plan), None
    try:
        host_dir = tempfile.mkdtemp(prefix="arena-sandbox-")
        code_path = os.path.join(host_dir, "main.py")
        with open(code_path, "wb") as f:
            f.write(source)
        config = _child_config(plan, code_path, host_dir, uid, timeout=timeout, memory_mb=memory_mb,
                               max_processes=max_processes, file_size_mb=file_size_mb,
                               open_files=open_files, tmpfs_mb=tmpfs_mb)
        cmd = [*plan.namespace_cmd, plan.interpreter, "-I", "-S", "-c", BOOTSTRAP, json.dumps(config)]
        proc = subprocess.Popen(cmd, cwd=host_dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        over_cap = None if plan.namespace_cmd else _host_write_cap(plan, host_dir, uid, tmpfs_mb)
        try:  # 4 bytes per char: utf-8's maximum
            stdout, stderr, timed_out, capped = _read_capped(proc, timeout, 4 * output_chars,
                                                             lambda: _kill_all(proc, plan, uid), over_cap)
        finally:
            _kill_all(proc, plan, uid)
            returncode = proc.wait()
            proc.stdout.close(), proc.stderr.close()
        stdout, stderr = (text.decode("utf-8", "replace")[:output_chars] for text in (stdout, stderr))
        if capped:  # after the output cap, so that it is always seen
            stderr += (f"\nsandbox: killed: the code wrote more than {tmpfs_mb} MiB or "
                       f"{TMPFS_INODES} files to the host's temp dir\n")
        return SandboxResult(stdout, stderr, returncode, timed_out, timed_out or returncode < 0,
                             uid)
    finally:
        if host_dir is not None:
            shutil.rmtree(host_dir, ignore_errors=True)
        if uid is not None and plan.drop_uid == "pool" and not plan.namespace_cmd:
            # plain mode has no private IPC namespace or tmpfs to drop them with (with Landlock
            # and seccomp the code cannot make them in the first place)
            remove_sysv_ipc_of_uid(uid)
            remove_temp_files_of_uid(uid)
        if uid is not None and plan.drop_uid == "pool" and not plan.seccomp:
            forget_state_of_uid(uid, plan.interpreter, mqueues=not plan.namespace_cmd)
        if uid_lock is not None:
            uid_lock.close()


def _child_config(plan: Plan, code_path: str, host_dir: str, uid: Optional[int], *, timeout: float,
                  memory_mb: int, max_processes: int, file_size_mb: int, open_files: int,
                  tmpfs_mb: int) -> dict:
    """What arena/envs/sandbox_child.py sets up, as JSON."""
    # CPU seconds: the wall timeout rounded up, plus one (hard limit one more -> SIGKILL)
    cpu = int(timeout) + 1
    # RLIMIT_NPROC counts every task (thread) of the real uid: allow max_processes more
    # than the uid runs now (0 for a pool uid; the caller's own tasks when unchanged)
    nproc = max_processes + sum(processes_of_uid(os.getuid() if uid is None else uid).values())
    return {
        "code_path": code_path,
        "work_dir": NS_WORK_DIR if plan.namespace_cmd else host_dir,
        "tmpfs": PRIVATE_TMP_DIRS if plan.namespace_cmd else [],
        "read_only_root": plan.read_only,
        "hidden_dirs": hidden_dirs(plan) if plan.namespace_cmd else [],
        "tmpfs_options": f"size={tmpfs_mb}m,nr_inodes={TMPFS_INODES},mode=1777",
        "ipc_namespace": bool(plan.namespace_cmd),
        "private_proc": bool(plan.namespace_cmd),
        "nest_user_namespace": plan.kind == "user-namespaces",
        "uid": uid,
        "landlock": plan.landlock,
        "seccomp": seccomp_rules(plan) if plan.seccomp else None,
        "keyctl_syscall": KEYCTL_SYSCALL.get(os.uname().machine),
        "socket_guard": not plan.namespace_cmd,
        "rlimits": {
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_AS": [memory_mb << 20] * 2,
            "RLIMIT_NPROC": [nproc] * 2,
            "RLIMIT_FSIZE": [file_size_mb << 20] * 2,
            "RLIMIT_NOFILE": [open_files] * 2,
            "RLIMIT_CORE": [0, 0],
        },
    }


def hidden_dirs(plan: Plan) -> list[str]:
    """The caller's home (its ~/.netrc, ~/.ssh, wandb and hub tokens) and runtime dir
    ($XDG_RUNTIME_DIR: its D-Bus and agent sockets, where not under /run), to cover with an
    empty tmpfs, unless the interpreter lives under one (a pyenv python, say) or it is "/"."""
    interpreter = os.path.realpath(plan.interpreter)
    found = []
    for path in (os.path.expanduser("~"), os.environ.get("XDG_RUNTIME_DIR")):
        path = os.path.realpath(path) if path else "/"
        if path == "/" or not os.path.isdir(path) or interpreter.startswith(path + os.sep):
            continue
        if not any(path == p or path.startswith(p + os.sep) for p in [*PRIVATE_TMP_DIRS, *found]):
            found.append(path)
    return found


def _read_capped(proc, timeout, limit, kill_all, over_cap=None) -> tuple[bytes, bytes, bool, bool]:
    """Read both pipes (keeping `limit` bytes each, discarding the rest) until EOF; at the
    deadline, once the leader exits, or once `over_cap()` (checked every WATCH_INTERVAL_S)
    says the code wrote too much, kill everything; stop 1 s after that regardless. Returns
    (stdout, stderr, timed out, over the write cap)."""
    chunks = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    selector = selectors.DefaultSelector()
    for fd in chunks:
        selector.register(fd, selectors.EVENT_READ)
    deadline, killed_at, timed_out, capped = time.monotonic() + timeout, None, False, False
    next_check = time.monotonic() + WATCH_INTERVAL_S
    while selector.get_map():
        now = time.monotonic()
        if killed_at is None and over_cap is not None and now >= next_check:
            capped, next_check = over_cap(), now + WATCH_INTERVAL_S
        if killed_at is None and (now > deadline or capped or _exited(proc)):
            timed_out = now > deadline and not _exited(proc)
            kill_all()
            killed_at = time.monotonic()
        if killed_at is not None and now > killed_at + 1.0:
            break  # something unkillable still holds a pipe; stop reading
        for key, _ in selector.select(timeout=WATCH_INTERVAL_S):
            data = os.read(key.fd, 65536)
            if not data:
                selector.unregister(key.fd)
            elif len(chunks[key.fd]) < limit:
                chunks[key.fd] += data[: limit - len(chunks[key.fd])]
    selector.close()
    out_fd, err_fd = chunks
    return bytes(chunks[out_fd]), bytes(chunks[err_fd]), timed_out, capped


def _host_write_cap(plan: Plan, host_dir: str, uid: Optional[int], tmpfs_mb: int):
    """Plain mode: a check that the code has written more to the host than a namespace mode's
    private tmpfs holds (`tmpfs_mb` MiB, TMPFS_INODES files): in its work dir (the only place
    Landlock lets it write), and for a pool uid without Landlock, anywhere in the shared temp
    dirs. Checked every WATCH_INTERVAL_S, so the code may overshoot by what it writes in that
    time; the whole work dir and, for a pool uid, what it left are removed after the call."""
    def entries():
        for root, dirs, files in os.walk(host_dir):
            for name in dirs + files:
                try:
                    yield os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    continue
        if uid is not None and plan.drop_uid == "pool" and not plan.landlock:
            yield from (size for _, _, size in entries_of_uid(uid))

    def over() -> bool:
        count = total = 0
        for size in entries():
            count, total = count + 1, total + size
            if count > TMPFS_INODES or total > tmpfs_mb << 20:
                return True
        return False
    return over
