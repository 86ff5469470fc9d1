"""One sandboxed call: start `python -I -S` with the child bootstrap (arena/envs/sandbox_child.py)
under the plan's namespaces, read its capped output until it ends or times out, then kill
everything it started and remove what it left (work dir; for a pool uid its processes and
SysV IPC objects). docs/sandbox.md, "Layers", describes each step.
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

UID_POOL_BASE = 1_500_000_000  # dedicated sandbox uids: UID_POOL_BASE + slot (no passwd entry)
UID_POOL_SIZE = 256
NOBODY = 65534
PRIVATE_TMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"]
NS_WORK_DIR = "/tmp/work"
BOOTSTRAP = (Path(__file__).parent / "sandbox_child.py").read_text(encoding="utf-8")
SYSV_IPC_TABLES = {"shm": "-m", "msg": "-q", "sem": "-s"}  # /proc/sysvipc/<table>, ipcrm flag


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
    seccomp: bool  # seccomp filter (plain mode only: no inet sockets, no SysV IPC)
    read_only: bool = False  # namespaces: every mount read-only (mount_setattr, Linux >= 5.12)

    @property
    def kind(self) -> str:
        if not self.namespace_cmd:
            return "plain"
        return "user-namespaces" if "--map-root-user" in self.namespace_cmd else "namespaces"

    @property
    def label(self) -> str:
        """The mode in force, e.g. "namespaces+uid+readonly+landlock" (recorded with each run)."""
        extras = [name for name, on in (("uid", self.drop_uid != "none"), ("readonly", self.read_only),
                                         ("landlock", self.landlock), ("seccomp", self.seccomp)) if on]
        return "+".join([self.kind, *extras])


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
        _kill_uid(uid, plan.interpreter)


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
        if uid is not None and plan.drop_uid == "pool" and not plan.namespace_cmd:
            # plain mode has no private IPC namespace or tmpfs to drop them with (with Landlock
            # and seccomp the code cannot make them in the first place)
            remove_sysv_ipc_of_uid(uid)
            remove_temp_files_of_uid(uid)
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
        "hidden_dirs": hidden_home(plan) if plan.namespace_cmd else [],
        "tmpfs_options": f"size={tmpfs_mb}m,nr_inodes=4096,mode=1777",
        "ipc_namespace": bool(plan.namespace_cmd),
        "private_proc": bool(plan.namespace_cmd),
        "nest_user_namespace": plan.kind == "user-namespaces",
        "uid": uid,
        "landlock": plan.landlock,
        "seccomp": plan.seccomp,
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


def remove_temp_files_of_uid(uid: int) -> None:
    """Remove what a pool uid left at the top of the shared temp dirs (/tmp, /dev/shm, ...)."""
    for parent in PRIVATE_TMP_DIRS:
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def hidden_home(plan: Plan) -> list[str]:
    """The caller's home, to cover with an empty tmpfs (its ~/.netrc, ~/.ssh, wandb and hub
    tokens), unless the interpreter lives under it (a pyenv python, say) or it is "/"."""
    home = os.path.realpath(os.path.expanduser("~"))
    interpreter = os.path.realpath(plan.interpreter)
    if home == "/" or not os.path.isdir(home) or interpreter.startswith(home + os.sep):
        return []
    return [home]


def sysv_ipc_of_uid(uid: int) -> dict[str, list[int]]:
    """{"shm"|"msg"|"sem": [ids]} of the SysV IPC objects (of this IPC namespace) owned by `uid`."""
    found: dict[str, list[int]] = {}
    for table in SYSV_IPC_TABLES:
        try:
            with open(f"/proc/sysvipc/{table}") as f:
                header, *rows = [line.split() for line in f]
        except OSError:
            continue
        id_col = header.index(f"{table}id" if table != "msg" else "msqid")
        owners = header.index("uid"), header.index("cuid")  # owner, creator
        found[table] = [int(row[id_col]) for row in rows if uid in (int(row[c]) for c in owners)]
    return {table: ids for table, ids in found.items() if ids}


def remove_sysv_ipc_of_uid(uid: int) -> None:
    """Remove the SysV IPC objects a pool uid left (root only; `ipcrm` from util-linux)."""
    for table, ids in sysv_ipc_of_uid(uid).items():
        args = [arg for i in ids for arg in (SYSV_IPC_TABLES[table], str(i))]
        subprocess.run(["ipcrm", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, timeout=10)


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


