"""What a pool uid (arena/envs/sandbox_process.py, UID_POOL_BASE) leaves after a sandboxed call, and
its removal: the uid's processes (killed as the uid itself), its files in the shared temp dirs, its
SysV IPC objects, its kernel keyrings and POSIX message queues. Each helper runs with a timeout and
never raises out of the call (`run_helper`). docs/sandbox.md, "Layers", says when each is needed.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time

logger = logging.getLogger(__name__)

# plain mode as root: where a pool uid may leave files (any world-writable dir below these)
SHARED_TMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"]
SYSV_IPC_TABLES = {"shm": "-m", "msg": "-q", "sem": "-s"}  # /proc/sysvipc/<table>, ipcrm flag


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


def run_helper(argv: list, timeout: float = 10.0) -> bool:
    """Run a clean-up helper (no input, output dropped); False, with a warning, when it did not
    finish within `timeout` (subprocess.run kills it then). A clean-up never raises out of a
    call: the tool call's result stands, and what the helper did not remove is logged."""
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=timeout, check=False)
        return True
    except subprocess.TimeoutExpired:
        logger.warning("sandbox clean-up helper %s timed out after %.0f s; what it was to remove may be left",
                       argv[0], timeout)
        return False


def kill_uid(uid: int, interpreter: str) -> None:
    """SIGKILL every process of `uid`: a helper that becomes `uid` and calls kill(-1, SIGKILL)
    (atomic with respect to fork), repeated until /proc shows none left."""
    script = f"import os; os.setgroups([]); os.setgid({uid}); os.setuid({uid}); os.kill(-1, 9)"
    for _ in range(20):
        if not processes_of_uid(uid):
            return
        run_helper([interpreter, "-I", "-S", "-c", script])
        time.sleep(0.01)


KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280}  # keyctl(2)
# as root, in a private mount namespace (unshare(CLONE_NEWNS); mount("/", MS_REC | MS_PRIVATE)),
# mount the host IPC namespace's mqueue filesystem and unlink the uid's queues
REMOVE_MQUEUES = """
import ctypes, os, tempfile
libc = ctypes.CDLL(None)
if libc.unshare(0x20000) == 0 and libc.mount(b"none", b"/", None, 0x44000, None) == 0:
    where = tempfile.mkdtemp()
    if libc.mount(b"mqueue", where.encode(), b"mqueue", 0, None) == 0:
        for name in os.listdir(where):
            try:
                if os.stat(os.path.join(where, name)).st_uid == {uid}:
                    os.unlink(os.path.join(where, name))
            except OSError:
                pass
        libc.umount2(where.encode(), 2)
    os.rmdir(where)
"""
# then, as the uid: keyctl(KEYCTL_GET_PERSISTENT, -1, user keyring) -> its persistent keyring;
# keyctl(KEYCTL_CLEAR, ring) for it, the user keyring (-4) and the user-session keyring (-5)
CLEAR_KEYRINGS = """
import ctypes, os
os.setgroups([]); os.setgid({uid}); os.setuid({uid})
k = lambda *a: ctypes.CDLL(None).syscall({nr}, *map(ctypes.c_long, a))
[k(7, ring) for ring in (-4, -5, k(22, -1, -4)) if ring != -1]
"""


def forget_state_of_uid(uid: int, interpreter: str, mqueues: bool) -> None:
    """What a pool uid keeps after its processes are gone, where seccomp did not refuse the
    calls that make it: its kernel keyrings (user, user-session, persistent; only the uid
    itself can name them), and with `mqueues` (plain mode) its POSIX message queues. One
    helper process, as root and then as the uid."""
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    script = (REMOVE_MQUEUES.format(uid=uid) if mqueues else "") + (
        CLEAR_KEYRINGS.format(uid=uid, nr=number) if number is not None else "")
    run_helper([interpreter, "-I", "-S", "-c", script])


def entries_of_uid(uid: int, parents=SHARED_TMP_DIRS):
    """(path, is_dir, allocated bytes) of each entry owned by `uid` in or below `parents`. The
    uid has no groups, so it can create entries only in world-writable dirs (a 1777
    subfolder such as /tmp/.X11-unix) and in its own dirs: only those are descended into."""
    stack = [p for p in parents if os.path.isdir(p) and not os.path.islink(p)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if info.st_uid == uid:
                yield entry.path, is_dir, info.st_blocks * 512
            elif is_dir and info.st_mode & 0o002:
                stack.append(entry.path)


def remove_temp_files_of_uid(uid: int) -> None:
    """Remove what a pool uid left anywhere in the shared temp dirs (/tmp, its 1777
    subfolders, /dev/shm, /dev/mqueue where mounted, ...)."""
    for path, is_dir, _ in list(entries_of_uid(uid)):
        try:
            if is_dir:
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


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
        run_helper(["ipcrm", *args])
