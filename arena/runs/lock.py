"""The lock on a run folder, held by the process that runs it (a sweep cell's job, `arena eval`),
never by a driver (docs/design.md, Run folder): `flock` on `<run>/.lock`, plus a heartbeat file
`<run>/.heartbeat` ("host pid time") rewritten every `period` seconds by a background thread,
for shared file systems where flock does not cross hosts. A holder is live if the flock is held,
or the heartbeat is younger than 3 periods and (on the same host) its pid is alive.
"""
from __future__ import annotations

import fcntl
import os
import socket
import threading
import time
from pathlib import Path

from arena.env_vars import BY_NAME, BadEnvironment

LOCK_NAME, HEARTBEAT_NAME = ".lock", ".heartbeat"


def heartbeat_period() -> float:
    """$ARENA_HEARTBEAT_S (checked against its range in arena/env_vars.py), else 10 s."""
    raw, var = os.environ.get("ARENA_HEARTBEAT_S") or "10", BY_NAME["ARENA_HEARTBEAT_S"]
    if not var.check(raw):
        raise BadEnvironment(f"ARENA_HEARTBEAT_S={raw!r}: valid: {var.valid} ({var.meaning})")
    return float(raw)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def heartbeat_is_live(cell_dir: Path, *, period: float | None = None, now: float | None = None) -> bool:
    """Heartbeat younger than 3 periods, and (same host) its writer still exists."""
    period = heartbeat_period() if period is None else period
    path = Path(cell_dir) / HEARTBEAT_NAME
    try:
        host, pid, _ = path.read_text().split()
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except (OSError, ValueError):
        return False
    if age >= 3 * period:
        return False
    if host == socket.gethostname():
        return int(pid) != os.getpid() and pid_alive(int(pid))
    return True


def flock_is_held(cell_dir: Path) -> bool:
    return file_lock_is_held(Path(cell_dir) / LOCK_NAME)


def file_lock_is_held(path: Path) -> bool:
    """True when some open file description (another process, or another open() here) holds a
    flock on `path`: our non-blocking exclusive try fails."""
    if not path.exists():
        return False
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


class CellLock:
    """Context manager: `with CellLock(dir) as held:`; `held` is False when another live
    process holds the cell (the caller then runs nothing)."""

    def __init__(self, cell_dir: str | Path, *, period: float | None = None):
        self.cell_dir = Path(cell_dir)
        self.period = heartbeat_period() if period is None else period
        self._fh = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.cell_dir / LOCK_NAME, "a")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._close()
            return False
        if heartbeat_is_live(self.cell_dir, period=self.period):  # a holder on another host
            self._close()
            return False
        self._beat()
        self._thread = threading.Thread(target=self._loop, name="arena-heartbeat", daemon=True)
        self._thread.start()
        return True

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            (self.cell_dir / HEARTBEAT_NAME).unlink()
        except OSError:
            pass
        self._close()

    def _beat(self) -> None:
        tmp = self.cell_dir / f"{HEARTBEAT_NAME}.{os.getpid()}.tmp"
        tmp.write_text(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
        os.replace(tmp, self.cell_dir / HEARTBEAT_NAME)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._beat()
            except OSError:
                pass

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the descriptor releases the flock
            self._fh = None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            self.release()
