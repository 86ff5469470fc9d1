"""Fast tests of arena/sweeps/launchers.py without a cluster: configs, errors, local and debug."""
from __future__ import annotations

import functools
import os

import pytest
import submitit

from arena.sweeps.launchers import (CheckpointableJob, job_parallelism, launcher_config, launcher_names,
                                    make_executor, requeue_with_sigterm_ignored, slurm_parameters,
                                    snapshot_code)


def pid_and_threads(offset: int) -> tuple[int, str | None, int]:
    return os.getpid(), os.environ.get("OMP_NUM_THREADS"), offset + 1


def test_shipped_launchers_are_listed():
    assert {"debug", "local", "slurm", "slurm_ci"} <= set(launcher_names())


def test_unknown_launcher_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown launcher 'pbs'; valid launchers: .*debug.*local.*slurm"):
        make_executor("pbs", tmp_path, timeout_min=5)


def test_unknown_key_lists_the_valid_keys(tmp_path):
    with pytest.raises(ValueError, match=r"unknown keys \['gpu'\]; valid keys: kind, partition, gpus"):
        make_executor("slurm_ci", tmp_path, cfg={"gpu": 1}, timeout_min=5)
    with pytest.raises(ValueError, match="is kind 'local'; cfg says 'slurm'"):
        make_executor("local", tmp_path, cfg={"kind": "slurm"}, timeout_min=5)


def test_slurm_yaml_maps_to_submitit_parameters():
    # configs/launcher/slurm.yaml: qos and account are null -> left out (the cluster's defaults)
    params = slurm_parameters(launcher_config("slurm"), timeout_min=90, cpus=8)
    assert params == {"slurm_partition": "gpu", "gpus_per_node": 1, "cpus_per_task": 8, "mem_gb": 64,
                      "timeout_min": 90, "slurm_array_parallelism": 32, "slurm_signal_delay_s": 120,
                      "nodes": 1, "tasks_per_node": 1}
    # slurm_ci.yaml with a qos and account: gpus 0 -> no --gpus-per-node
    ci = {**launcher_config("slurm_ci"), "qos": "low", "account": "lab"}
    assert slurm_parameters(ci, timeout_min=10, cpus=1) == {
        "slurm_partition": "debug", "cpus_per_task": 1, "mem_gb": 2, "timeout_min": 10,
        "slurm_qos": "low", "slurm_account": "lab", "slurm_array_parallelism": 4,
        "slurm_signal_delay_s": 30, "nodes": 1, "tasks_per_node": 1}


def test_job_parallelism_per_launcher():
    cores = os.cpu_count() or 1
    assert job_parallelism("local", cpus=1) == cores
    assert job_parallelism("local", cpus=cores * 2) == 1  # never 0
    assert job_parallelism("debug") == 1
    assert job_parallelism("slurm_ci") == 4


def test_debug_launcher_runs_in_process(tmp_path):
    executor = make_executor("debug", tmp_path, timeout_min=None)
    job = executor.submit(CheckpointableJob(functools.partial(pid_and_threads, 41)))
    assert job.result() == (os.getpid(), os.environ.get("OMP_NUM_THREADS"), 42)


def test_local_launcher_runs_a_subprocess_with_its_threads_and_timeout(tmp_path):
    executor = make_executor("local", tmp_path, timeout_min=7, cpus=2)
    assert executor.parameters["timeout_min"] == 7  # not submitit's 2-minute default
    pid, threads, value = executor.submit(pid_and_threads, 1).result()
    assert pid != os.getpid() and threads == "2" and value == 2


def test_checkpoint_resubmits_a_fresh_wrapper_of_the_same_function():
    fn = functools.partial(pid_and_threads, 9)
    job = CheckpointableJob(fn)
    delayed = job.checkpoint()
    assert isinstance(delayed, submitit.helpers.DelayedSubmission)
    assert isinstance(delayed.function, CheckpointableJob) and delayed.function is not job
    assert delayed.function.fn is fn and delayed.result()[2] == 10


def fake_scontrol(folder, body: str) -> str:
    """A PATH whose `scontrol` runs `body` (sh) and records its arguments in folder/args."""
    script = folder / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" > {folder}/args\n{body}\n')
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture
def sigterm_not_ignored():
    """SIGTERM at its default action in this process, so that a fake scontrol that ignores it does
    so because the requeue made it so. A process started in the background by a shell without job
    control may inherit an ignored signal, and a shell can't undo that (POSIX): the fake's
    `kill -TERM $$` would then be ignored whatever the code under test did."""
    import signal

    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("body, raises", [
    ("exit 0", False),  # requeued
    # SLURM's SIGTERM of the job (a preemption's, or the requeue's) reaches scontrol: ignored, it runs on
    ("kill -TERM $$", False),
    ("exit 1", True),  # scontrol failed: submitit's error stands
    ("kill -KILL $$", True),  # killed (SIGKILL, which no disposition ignores): it may not have requeued
])
def test_requeue_runs_scontrol_deaf_to_sigterm(tmp_path, monkeypatch, sigterm_not_ignored, body, raises):
    import signal
    import subprocess

    from submitit.slurm.slurm import SlurmJobEnvironment

    monkeypatch.setenv("PATH", fake_scontrol(tmp_path, f"{body}\necho ran-on > {tmp_path}/after"))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    env = SlurmJobEnvironment()

    def bypass(signum, frame):  # stands for submitit's handler, which only logs SIGTERM
        pass

    signal.signal(signal.SIGTERM, bypass)
    if raises:
        with pytest.raises(subprocess.CalledProcessError):
            requeue_with_sigterm_ignored(env, 3)
    else:
        requeue_with_sigterm_ignored(env, 3)
    assert (tmp_path / "args").read_text() == "requeue 77\n"
    # the fake ran on past its `kill -TERM $$` (the other bodies exit or die before the echo)
    assert (tmp_path / "after").exists() == (body == "kill -TERM $$")
    assert signal.getsignal(signal.SIGTERM) is bypass  # this process's handler is back


def test_a_job_requeues_through_the_sigterm_deaf_requeue(monkeypatch):
    from submitit.slurm.slurm import SlurmJobEnvironment

    monkeypatch.setattr(SlurmJobEnvironment, "_requeue", SlurmJobEnvironment._requeue)  # restored after the test
    assert CheckpointableJob(functools.partial(pid_and_threads, 1))()[2] == 2
    assert SlurmJobEnvironment._requeue is requeue_with_sigterm_ignored


def test_snapshot_copies_the_package_without_bytecode(tmp_path):
    dest = snapshot_code(tmp_path / "code")
    assert dest == (tmp_path / "code").resolve()
    assert (dest / "arena" / "sweeps" / "launchers.py").is_file()
    assert not list(dest.rglob("__pycache__"))


def test_the_cluster_fixture_skips_only_where_no_cluster_can_start(monkeypatch):
    from tests.slurm import conftest

    monkeypatch.setattr(conftest.os, "geteuid", lambda: 1000)
    assert conftest.why_no_cluster() == "no SLURM cluster answers and starting one (tests/slurm/up.sh) needs root"
    monkeypatch.setattr(conftest.os, "geteuid", lambda: 0)
    monkeypatch.setattr(conftest.shutil, "which", lambda name, path=None: None)  # no SLURM, no apt-get
    assert "there is no apt-get to install them" in conftest.why_no_cluster()
    # root with apt-get but no SLURM yet: it can start one (up.sh installs the packages first)
    monkeypatch.setattr(conftest.shutil, "which", lambda name, path=None: "/usr/bin/apt-get" if name == "apt-get" else None)
    assert conftest.why_no_cluster() is None


def test_visible_gpus_counts_the_lines_of_nvidia_smi_without_cuda_visible_devices(tmp_path, monkeypatch):
    # launcher=local_gpu (gpus: all) with $CUDA_VISIBLE_DEVICES unset asks `nvidia-smi -L`: a stand-in
    # on PATH prints two "GPU i: ..." lines and one other line, so two GPUs are visible
    from arena.sweeps.launchers import local_gpus, visible_gpus

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: a)'\necho 'GPU 1: NVIDIA H100 (UUID: b)'\n"
                   "echo '  MIG 1g.10gb Device 0'\n")
    smi.chmod(0o755)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert visible_gpus() == 2 and local_gpus({"gpus": "all"}) == 2
