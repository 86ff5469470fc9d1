"""Run a "trainer" process as user nobody that imports arena.envs.sandbox (and the attack
battery) with the system python, wherever the repository was cloned.

A clone inside a 0700 folder (any checkout under /root) is unreadable to nobody. Then the
trainer imports a copy of what it needs (arena/ and the battery module), made once per test
session in a temp dir nobody can read and removed at exit; the copy is what the tests import
in the clone, file for file. A test skips, with the reason, only where no system python that
nobody can run exists.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
IMPORTS = "import arena.envs.sandbox, tests.envs.test_sandbox_battery; print('ok')"
COPIED = ("arena", "tests/__init__.py", "tests/envs/__init__.py", "tests/envs/test_sandbox_battery.py")


def as_nobody(interpreter: str, script: str, **kwargs) -> subprocess.CompletedProcess:
    """`interpreter -I -S -c script` as user nobody (no groups), from "/"."""
    return subprocess.run([interpreter, "-I", "-S", "-c", script], user=65534, group=65534,
                          extra_groups=[], cwd="/", capture_output=True, text=True, **kwargs)


def _imports_as_nobody(interpreter: str, repo: Path) -> subprocess.CompletedProcess:
    return as_nobody(interpreter, f"import sys; sys.path.insert(0, {str(repo)!r}); {IMPORTS}", timeout=60)


def _readable_copy() -> Path:
    """What the trainer imports, copied into a temp dir nobody can read (0755 dirs, 0644 files)."""
    copy = Path(tempfile.mkdtemp(prefix="arena-nobody-repo-"))
    atexit.register(shutil.rmtree, copy, True)
    for name in COPIED:
        source, target = REPO / name, copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, target)
    for root, dirs, files in os.walk(copy):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return copy


@functools.lru_cache(maxsize=None)
def _nobody_setup() -> tuple[str, str] | str:
    """(interpreter, repository path nobody imports from), or the reason there is none."""
    interpreters = [p for p in SYSTEM_PYTHONS if os.path.exists(p)]  # never run a missing one
    if not interpreters:
        return f"none of {SYSTEM_PYTHONS} exists: no system python for user nobody"
    failures = []
    for interpreter in interpreters:
        if _imports_as_nobody(interpreter, REPO).stdout.strip() == "ok":
            return interpreter, str(REPO)
        copy = _readable_copy() if not failures else Path(failures[0][1])
        check = _imports_as_nobody(interpreter, copy)
        if check.stdout.strip() == "ok":
            return interpreter, str(copy)
        failures.append((interpreter, str(copy), check.stderr.strip()[-300:]))
    return "user nobody cannot import arena.envs.sandbox with " + "; ".join(
        f"{interpreter}: {error}" for interpreter, _, error in failures)


def nobody_python() -> tuple[str, str]:
    """(a system python nobody can run, the repository path it imports arena from); skips
    with the reason where there is none, or where this process cannot become nobody."""
    if os.geteuid() != 0:
        pytest.skip("running a trainer as user nobody needs root")
    setup = _nobody_setup()
    if isinstance(setup, str):
        pytest.skip(setup)
    return setup
