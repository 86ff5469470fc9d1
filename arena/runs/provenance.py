"""Provenance for summary.json (docs/design.md §F): git SHA and dirty flag (recorded by the
driver at submit time and passed in ARENA_GIT_SHA / ARENA_GIT_DIRTY, or by `arena train` at its
start: `pin_git_state`), package versions, host, SLURM job id."""
from __future__ import annotations

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
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None


_PINNED: tuple[str | None, bool | None] | None = None  # (sha, dirty) at `arena train`'s start


def pin_git_state() -> None:
    """Record the checkout's (sha, dirty) now, unless a sweep driver passed them: `arena train`
    calls it first, so summary.json names the commit the run started from, not whatever the
    checkout holds when it ends."""
    global _PINNED
    if "ARENA_GIT_SHA" not in os.environ and _PINNED is None:
        _PINNED = git_state()


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
    if "ARENA_GIT_SHA" in os.environ:
        sha, dirty = os.environ["ARENA_GIT_SHA"] or None, os.environ.get("ARENA_GIT_DIRTY") == "1"
    elif _PINNED is not None:
        sha, dirty = _PINNED
    else:
        sha, dirty = git_state()
    return {
        "test_hooks": active_test_hooks(),  # {} in a real run (arena/env_vars.py)
        "git_sha": sha,
        "git_dirty": dirty,
        "versions": package_versions(),
        "host": platform.node(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
