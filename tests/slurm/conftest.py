"""Session fixture `slurm_cluster`: a real single-node SLURM cluster for the SLURM tests.

Uses a cluster that already answers (`scontrol ping`) and leaves it running. Otherwise, on a
machine that can run one (root, and the SLURM binaries or apt-get to install them), it starts
one with tests/slurm/up.sh and stops it with down.sh at the end of the session. Elsewhere the
tests skip, saying why. A cluster that should start but does not fails the tests (no skip).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BINARIES = ("slurmctld", "slurmd", "slurmdbd", "sbatch", "srun", "sacct", "munged", "mariadbd")


@dataclass(frozen=True)
class SlurmCluster:
    started_here: bool  # True: up.sh started it and down.sh stops it after the session
    base: Path  # up.sh's state/log/pid folder (logs in base/log when started here)


def cluster_answers() -> bool:
    """A SLURM controller answers and accounting works (submitit needs `sacct`)."""
    if shutil.which("scontrol") is None or shutil.which("sacct") is None:
        return False
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15)
        sacct = subprocess.run(["sacct", "-n", "-X", "-o", "JobID"], capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "UP" in ping.stdout and sacct.returncode == 0


def why_no_cluster() -> str | None:
    """The reason this machine cannot start the test cluster, or None when it can."""
    if os.geteuid() != 0:
        return "no SLURM cluster answers and starting one (tests/slurm/up.sh) needs root"
    search_path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [b for b in BINARIES if shutil.which(b, path=search_path) is None]
    if missing and shutil.which("apt-get") is None:
        return f"no SLURM cluster answers; {missing} are missing and there is no apt-get to install them"
    return None


def _run_script(name: str, timeout_s: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(HERE / name)], capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL, env=env)


@pytest.fixture(scope="session")
def slurm_cluster():
    base = Path(os.environ.get("ARENA_SLURM_BASE", "/tmp/arena-slurm"))
    if cluster_answers():
        yield SlurmCluster(started_here=False, base=base)
        return
    reason = why_no_cluster()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "ARENA_SLURM_BASE": str(base), "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
    up = _run_script("up.sh", 300, env)  # installs the packages first when they are missing
    if up.returncode == 3:  # a foreign /etc/slurm config: ours would overwrite it
        pytest.skip(f"no SLURM cluster answers and up.sh will not replace this machine's config: {up.stdout.strip()}")
    if up.returncode != 0:
        _run_script("down.sh", 60, env)
        pytest.fail(f"tests/slurm/up.sh failed (exit {up.returncode}):\n{up.stdout}\n{up.stderr}")
    try:
        yield SlurmCluster(started_here=True, base=base)
    finally:
        _run_script("down.sh", 120, env)
