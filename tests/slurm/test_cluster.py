"""The SLURM launcher against a real single-node cluster (tests/slurm/up.sh, fixture in conftest).

Jobs are tiny functions of this module that write files (no training), pickled by value because
the jobs import only the `arena` snapshot, not `tests`. Launcher: configs/launcher/slurm_ci.yaml
(partition debug, no GPUs, 1 CPU, 2 GB, timeout_min 10).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import pytest
import submitit

from arena.sweeps.launchers import CheckpointableJob, launcher_config, make_executor

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# ---------------------------------------------------------------- job functions (run on SLURM)
def describe_job(marker: str) -> dict:
    import arena

    Path(marker).write_text("ran")
    keys = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS")
    return {"python": sys.executable, "arena": arena.__file__, "cwd": os.getcwd(),
            **{k: os.environ.get(k) for k in keys}}


def square_to_file(folder: str, x: int) -> int:
    Path(folder, f"{x}.txt").write_text(str(x * x))
    return x * x


def sleep_then_write(marker: str, seconds: float) -> str:
    time.sleep(seconds)
    Path(marker).write_text("finished")
    return "finished"


def count_steps(progress_file: str, n: int, step_s: float) -> dict:
    """Counts to n, saving {"i", "starts", "restarts"} after every step; resumes from the file.

    `starts` lists the i each run began at; `restarts` SLURM_RESTART_COUNT of each run.
    """
    path = Path(progress_file)
    state = json.loads(path.read_text()) if path.exists() else {"i": 0, "starts": [], "restarts": []}
    state["starts"].append(state["i"])
    state["restarts"].append(os.environ.get("SLURM_RESTART_COUNT"))

    def save() -> None:
        path.with_suffix(".tmp").write_text(json.dumps(state))
        path.with_suffix(".tmp").replace(path)

    save()
    while state["i"] < n:
        time.sleep(step_s)
        state["i"] += 1
        save()
    return state


# `scontrol` wrappers (sh; $REAL is the real scontrol) that make one order of the preemption race certain
SCONTROL_THEN_SIGTERM = '"$REAL" "$@"\nkill -TERM $$\n'  # the requeue's SIGTERM reaches scontrol after its RPC
# SLURM's SIGTERM to the job's step reaches scontrol before its RPC: the SIGTERM of a preemption
# (`scancel --signal TERM`, sent before SIGUSR2 but delivered after it), then 2 s for it to arrive
SIGTERM_THEN_SCONTROL = 'scancel --signal TERM "$SLURM_JOB_ID"\nsleep 2\nexec "$REAL" "$@"\n'


def count_steps_with_a_wrapped_scontrol(wrapper_dir: str, real_scontrol: str, body: str, progress_file: str,
                                        n: int, step_s: float) -> dict:
    """count_steps, with `scontrol` on this job's PATH a wrapper (sh `body`, the real one in $REAL)."""
    wrapper = Path(wrapper_dir, "scontrol")
    wrapper.write_text(f'#!/bin/sh\nREAL="{real_scontrol}"\n{body}')
    wrapper.chmod(0o755)
    os.environ["PATH"] = f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}"
    return count_steps(progress_file, n, step_s)


def raise_value_error(tag: str) -> None:
    raise ValueError(f"cell exploded: {tag}")


# ---------------------------------------------------------------- helpers
def ci_executor(folder: Path, timeout_min: int = 10):
    return make_executor("slurm_ci", folder, timeout_min=timeout_min)


def sacct_state(job_id: str) -> str:
    """The job's state straight from `sacct` (allocation line only)."""
    out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[0] if out.strip() else ""


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def read_progress(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"i": 0, "starts": []}


def interrupt_and_resume(tmp_path: Path, *, timeout: bool, timeout_min: int,
                         scontrol_body: str | None = None) -> tuple[dict, int, str]:
    """Run count_steps (or, with `scontrol_body`, count_steps_with_a_wrapped_scontrol), interrupt it
    after >= 3 steps, and return (result, i at interrupt, log)."""
    progress = tmp_path / "progress.json"
    executor = ci_executor(tmp_path / "jobs", timeout_min=timeout_min)
    fn = functools.partial(count_steps, str(progress), 16, 0.5)
    if scontrol_body is not None:
        (tmp_path / "bin").mkdir()
        fn = functools.partial(count_steps_with_a_wrapped_scontrol, str(tmp_path / "bin"),
                               shutil.which("scontrol"), scontrol_body, str(progress), 16, 0.5)
    job = executor.submit(CheckpointableJob(fn))
    wait_until(lambda: read_progress(progress)["i"] >= 3, 60, "3 steps before the interrupt")
    job._interrupt(timeout=timeout)  # scancel --signal [SIGTERM then] USR2, like SLURM does
    i_at_interrupt = read_progress(progress)["i"]
    result = job.result()
    return result, i_at_interrupt, job.stdout() + job.stderr()


# ---------------------------------------------------------------- tests
def test_slurm_ci_config_is_the_small_debug_partition():
    cfg = launcher_config("slurm_ci")
    assert (cfg["kind"], cfg["partition"], cfg["gpus"], cfg["cpus"], cfg["mem_gb"]) == ("slurm", "debug", 0, 1, 2)


def test_simple_job_runs_the_venv_python_on_the_code_snapshot(slurm_cluster, tmp_path):
    executor = ci_executor(tmp_path / "jobs")
    job = executor.submit(describe_job, str(tmp_path / "marker"))
    info = job.result()
    assert (tmp_path / "marker").read_text() == "ran"
    # the job's interpreter is the driver's (the project's venv), not the system python
    assert info["python"] == sys.executable
    # it imports the snapshot taken at submit time, and runs inside it
    snapshot = Path(info["cwd"])
    assert snapshot.parent == (tmp_path / "jobs" / "code").resolve()
    assert info["arena"] == str(snapshot / "arena" / "__init__.py")
    assert (info["SLURM_JOB_ID"], info["SLURM_JOB_PARTITION"]) == (job.job_id, "debug")
    assert (info["SLURM_CPUS_PER_TASK"], info["OMP_NUM_THREADS"]) == ("1", "1")
    wait_until(lambda: sacct_state(job.job_id) == "COMPLETED", 30, "sacct COMPLETED")


def test_job_array_runs_every_task(slurm_cluster, tmp_path):
    executor = ci_executor(tmp_path / "jobs")
    out = tmp_path / "out"
    out.mkdir()
    xs = [0, 1, 2, 3, 4]
    jobs = executor.map_array(square_to_file, [str(out)] * len(xs), xs)
    # one array job: ids <array>_<index>, index 0..4
    array_ids = {j.job_id.split("_")[0] for j in jobs}
    assert len(array_ids) == 1 and [j.job_id.split("_")[1] for j in jobs] == ["0", "1", "2", "3", "4"]
    assert [j.result() for j in jobs] == [0, 1, 4, 9, 16]
    assert {p.name: p.read_text() for p in out.iterdir()} == {"0.txt": "0", "1.txt": "1", "2.txt": "4",
                                                             "3.txt": "9", "4.txt": "16"}
    sbatch = next((tmp_path / "jobs").glob("*/*submission.sh")).read_text()
    assert "#SBATCH --array=0-4%4" in sbatch  # slurm_ci.yaml: array_parallelism 4


def test_cancel_shows_cancelled_in_sacct(slurm_cluster, tmp_path):
    executor = ci_executor(tmp_path / "jobs")
    marker = tmp_path / "marker"
    job = executor.submit(sleep_then_write, str(marker), 60)
    wait_until(lambda: sacct_state(job.job_id) == "RUNNING", 30, "RUNNING")
    job.cancel(check=True)
    wait_until(lambda: sacct_state(job.job_id).startswith("CANCELLED"), 30, "sacct CANCELLED")
    assert job.get_info(mode="force")["State"].startswith("CANCELLED")
    job._results_timeout_s = 1  # no result file will come: skip submitit's 15 s wait for a slow FS
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    assert not marker.exists()


def test_preemption_checkpoints_requeues_and_resumes_from_disk(slurm_cluster, tmp_path):
    # timeout_min=30: submitit counts a signal before 0.8*30 min as a preemption (no timeout used)
    result, i_at_interrupt, log = interrupt_and_resume(tmp_path, timeout=False, timeout_min=30)
    assert result["i"] == 16
    # two runs of the same SLURM job: the second began where the first stopped, not at 0
    assert result["restarts"] == [None, "1"]
    assert result["starts"][0] == 0 and i_at_interrupt <= result["starts"][1] < 16
    assert "this job is preempted" in log and "(3 remaining timeouts)" in log


@pytest.mark.parametrize("scontrol_body", [SCONTROL_THEN_SIGTERM, SIGTERM_THEN_SCONTROL],
                         ids=["sigterm-after-requeue", "sigterm-before-requeue"])
def test_a_requeue_whose_scontrol_gets_sigterm_still_resumes(slurm_cluster, tmp_path, scontrol_body):
    # SLURM's SIGTERM of the job reaches `scontrol requeue` after or before it requeued (forced here):
    # submitit alone failed the job in the first order, and counting a terminated scontrol as requeued
    # failed it in the second (the job ended FAILED, never requeued; arena.sweeps.launchers)
    result, i_at_interrupt, log = interrupt_and_resume(tmp_path, timeout=False, timeout_min=30,
                                                       scontrol_body=scontrol_body)
    assert result["i"] == 16 and result["restarts"] == [None, "1"]
    assert result["starts"][0] == 0 and i_at_interrupt <= result["starts"][1] < 16
    assert "Requeued job" in log and "DUE TO JOB REQUEUE" in log


def test_timeout_requeues_and_resumes(slurm_cluster, tmp_path):
    # timeout_min=10: guaranteed walltime = min(0.8*600, 600-600) s = 0, so USR2 is a timeout
    result, i_at_interrupt, log = interrupt_and_resume(tmp_path, timeout=True, timeout_min=10)
    assert result["i"] == 16 and result["restarts"] == [None, "1"]
    assert result["starts"][0] == 0 and i_at_interrupt <= result["starts"][1] < 16
    assert "this job is timed-out" in log and "(2 remaining timeouts)" in log


def test_a_raising_job_fails_with_its_traceback(slurm_cluster, tmp_path):
    executor = ci_executor(tmp_path / "jobs")
    job = executor.submit(CheckpointableJob(functools.partial(raise_value_error, "tag-42")))
    with pytest.raises(submitit.core.utils.FailedJobError) as failure:
        job.result()
    message = str(failure.value)
    assert "Traceback" in message and "ValueError: cell exploded: tag-42" in message
    assert "raise_value_error" in job.stderr()
    wait_until(lambda: sacct_state(job.job_id) == "FAILED", 30, "sacct FAILED")
