"""Provenance for summary.json (docs/design.md §F): the code the job ran, package versions,
host, SLURM job id.

The code record is read by the job itself when it starts (`pin_code_state`: each sweep cell
at its start, `arena train` at its start), not by the sweep driver when the sweep starts, so a
cell trained after the checkout was edited mid-sweep records that:
  - `git_sha`, `git_dirty`: the checkout of the package this process imports; outside git (a
    SLURM job's snapshot of the package, an installed sdist) the driver's record of the checkout
    it copied (ARENA_GIT_SHA / ARENA_GIT_DIRTY), or null;
  - `code_hash`: sha256 of the package's files (relative path and bytes, sorted; __pycache__
    and *.pyc left out): what decides "the same code" outside git, and what shows an edit that
    git's dirty flag misses (an untracked module). When the files differ from those the process
    started with (a long-lived worker), `git_dirty` is true: the process may run either."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from arena.env_vars import active_test_hooks

PACKAGES = ("arena", "torch", "transformers", "verl", "numpy")


def git_state(repo: Path | None = None) -> tuple[str | None, bool | None]:
    """(sha, dirty) of the repository holding this package, or (None, None) outside git."""
    repo = repo or Path(__file__).resolve().parents[2]
    try:
        tracked = subprocess.run(["git", "-C", str(repo), "ls-files", "--error-unmatch", "--", str(Path(__file__).resolve())],
                                 capture_output=True, text=True, timeout=10)
        if tracked.returncode != 0:
            return None, None  # this file is not git's (e.g. a snapshot of the package inside another checkout)
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None


def package_hash(root: Path | None = None) -> str:
    """sha256 over the files of the package at `root` (default: the `arena` this process
    imports): each file's path relative to it and its bytes, in sorted order."""
    root = root or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if not f.endswith(".pyc")):
            path = Path(folder) / name
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


_STARTED_WITH = package_hash()  # the files this process imported (approximately: its start)
_PINNED: dict | None = None  # code_state() at the job's start


def code_state() -> dict:
    """{"git_sha", "git_dirty", "code_hash"} of the code this process runs, read now (module
    docstring)."""
    sha, dirty = git_state()
    if sha is None and os.environ.get("ARENA_GIT_SHA"):  # a snapshot outside git: the driver's record
        sha, dirty = os.environ["ARENA_GIT_SHA"], os.environ.get("ARENA_GIT_DIRTY") != "0"
    code_hash = package_hash()
    if code_hash != _STARTED_WITH:  # edited since this process imported it
        dirty = True
    return {"git_sha": sha, "git_dirty": dirty, "code_hash": code_hash}


def pin_code_state() -> dict:
    """Record the code state now: a job calls it when it starts, so summary.json names the code
    the run started from, not the driver's at the sweep's start nor the checkout's at the end."""
    global _PINNED
    _PINNED = code_state()
    return _PINNED


def package_versions() -> dict[str, str | None]:
    """{package: installed version, or None} for PACKAGES."""
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return versions


def provenance() -> dict:
    code = _PINNED if _PINNED is not None else code_state()
    return {
        "test_hooks": active_test_hooks(),  # {} in a real run (arena/env_vars.py)
        **code,
        "versions": package_versions(),
        "host": platform.node(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
