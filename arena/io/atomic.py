"""Atomic file writes: write a sibling temp file, fsync it, os.replace it into place, fsync the
folder (so the rename itself survives a crash). The file gets the mode a plain `open(path, "w")`
would give it (0666 minus the user's umask), not tempfile's private 0600, so a lab-mate can read
a shared results directory (docs/design.md, Run folder).

Nothing is written through a symlink planted in a run folder: a symlink at `path` itself is
replaced by the new file (os.replace renames over the link, never into its target), a folder
`path` sits in that is a symlink is refused (SymlinkRefused), and appends (`append_text`) open
with O_NOFOLLOW, refusing a symlink too."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .faults import crash_point


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else set-and-restore."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    # mode = 0o666 & ~umask  (what open(..., "w") creates)
    return 0o666 & ~current_umask()


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename/creation inside `folder` durable (a no-op where directories can't be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class SymlinkRefused(OSError):
    """A write would go through a symlink (module docstring)."""


def refuse_symlinked_folder(path: Path) -> None:
    if path.parent.is_symlink():
        raise SymlinkRefused(f"{path.parent} is a symlink (to {os.readlink(path.parent)}): refusing to write {path.name} "
                             "through it; replace the link with a real folder")


def append_text(path: str | os.PathLike, text: str, *, fsync: bool = False) -> None:
    """Append `text` to `path` (created if missing), never through a symlink (module docstring)."""
    path = Path(path)
    refuse_symlinked_folder(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, file_mode())
    except OSError as exc:
        if path.is_symlink():
            raise SymlinkRefused(f"{path} is a symlink (to {os.readlink(path)}): refusing to append through it; "
                                 "remove the link") from exc
        raise
    with os.fdopen(fd, "a") as fh:
        fh.write(text)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())


def atomic_write_with(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """`write(tmp_path)` fills a sibling temp file; it is then fsynced, given the umask mode and
    renamed onto `path` in one os.replace (over a symlink at `path`, never through it). A
    failure (or kill) leaves `path` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_symlinked_folder(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        crash_point(path.name)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def remove_temps_of_killed_writes(folder: str | os.PathLike) -> None:
    """Delete the temp files that atomic_write_with leaves in `folder` (not below it) when its process
    is killed between creating one and renaming it onto its name: `.<name>.<random>.tmp`. Their content
    never reached its name (the write is redone, or was not needed). Only a process that holds the
    folder's lock may call it, and not on the folder the lock itself lives in: another writer's temp
    file in flight, or the lock's heartbeat (`.heartbeat.<pid>.tmp`, arena/runs/lock.py), would
    be deleted under it."""
    folder = Path(folder)
    if folder.is_dir():
        for tmp in folder.glob(".*.tmp"):
            if tmp.is_file() and not tmp.is_symlink():
                tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_with(path, lambda tmp: Path(tmp).write_text(text))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def fsync_tree(folder: str | os.PathLike) -> None:
    """fsync every file under `folder`, then every folder in it (deepest first) and `folder`
    itself: a checkpoint folder renamed into place by os.replace is then on disk as a whole.
    Call it before writing the marker that says the folder is complete (e.g. bc.json)."""
    folder = Path(folder)
    dirs = [folder]
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            continue
        if path.is_dir():
            dirs.append(path)
        elif path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    for path in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(path)
    fsync_dir(folder.parent)


def folder_digest(folder: str | os.PathLike) -> dict[str, list]:
    """{relative path: [bytes, sha256 hex]} of every regular file under `folder` (sorted), the
    record a cache keeps to tell a complete folder from a truncated or corrupted one."""
    import hashlib

    folder = Path(folder)
    out: dict[str, list] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        out[path.relative_to(folder).as_posix()] = [path.stat().st_size, digest.hexdigest()]
    return out


def digest_problem(folder: str | os.PathLike, recorded: dict[str, list]) -> str | None:
    """None when every file of `recorded` (folder_digest) is in `folder` with the same size and
    hash, else the first difference, naming the file."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder} does not exist"
    now = folder_digest(folder)
    for name, (size, sha) in sorted(recorded.items()):
        if name not in now:
            return f"{folder / name} is missing"
        if now[name][0] != size:
            return f"{folder / name} has {now[name][0]} bytes, {size} were written (truncated?)"
        if now[name][1] != sha:
            return f"{folder / name} differs from what was written (sha256 mismatch)"
    return None


def atomic_write_dir(path: str | os.PathLike, fill: Callable[[Path], None]) -> Path:
    """`fill(tmp)` fills a sibling temp folder; its files are fsynced and given the modes a plain
    mkdir/open would (not mkdtemp's private 0700), and it is renamed onto `path`. A kill
    mid-write leaves `path` as it was (no half folder under that name: only a hidden
    `.<name>.tmp-*` sibling). An existing folder at `path` is replaced (moved aside, then deleted)."""
    import shutil

    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        fill(tmp)
        dir_mode = 0o777 & ~current_umask()
        for item in [tmp, *tmp.rglob("*")]:
            if not item.is_symlink():
                os.chmod(item, dir_mode if item.is_dir() else file_mode())
        fsync_tree(tmp)
        crash_point(path.name)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(path.parent)
    return path
