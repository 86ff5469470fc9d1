"""Launchers: submitit executors for `local` (subprocesses), `debug` (in-process) and `slurm`.

Each launcher is a YAML file in `configs/launcher/<name>.yaml` (read by arena.config.launchers)
whose `kind` picks the executor:
`local.yaml`, `debug.yaml`, `slurm.yaml` (edit for your cluster) and `slurm_ci.yaml` (the
single-node test cluster of tests/slurm/). The sweep driver calls

    executor = make_executor("slurm", folder, timeout_min=60)
    job = executor.submit(CheckpointableJob(functools.partial(run_cell, cfg_dict)))

so a preempted or timed-out SLURM job calls `CheckpointableJob.checkpoint`, is requeued by
submitit, and the run resumes from its own on-disk checkpoint. For SLURM the `arena` package is
snapshotted at submit time (queued jobs never see later edits); every path is absolute.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import submitit
from submitit.slurm.slurm import SlurmJobEnvironment

from arena.config.launchers import (KEYS, KINDS, check_launcher_keys, launcher_config,  # noqa: F401 (re-exported)
                                    launcher_names)
import arena

# The launcher files themselves (names, kinds, keys) are arena.config.launchers'.
# launcher YAML key -> submitit AutoExecutor parameter (SLURM).
SLURM_PARAMETERS = {
    "partition": "slurm_partition",
    "gpus": "gpus_per_node",
    "cpus": "cpus_per_task",
    "mem_gb": "mem_gb",
    "timeout_min": "timeout_min",
    "qos": "slurm_qos",
    "account": "slurm_account",
    "array_parallelism": "slurm_array_parallelism",
    "signal_delay_s": "slurm_signal_delay_s",
}


def _settings(launcher: str, cfg: Mapping[str, Any] | None) -> dict:
    """The launcher's YAML with `cfg` laid over it (a `kind` in cfg may not change the kind)."""
    settings = launcher_config(launcher)
    merged = {**settings, **dict(cfg or {})}
    if merged["kind"] != settings["kind"]:
        raise ValueError(f"launcher {launcher!r} is kind {settings['kind']!r}; cfg says {merged['kind']!r}")
    check_launcher_keys(launcher, merged)
    return merged


def job_parallelism(launcher: str, *, cfg: Mapping[str, Any] | None = None, cpus: int | None = None) -> int:
    """How many jobs the driver should keep running at once on this launcher.

    local: cores // cpus-per-job (at least 1) workers, each running cell after cell (pool.py);
    debug: 1; slurm: array_parallelism (one job per cell).
    """
    settings = _settings(launcher, cfg)
    if settings["kind"] == "debug":
        return 1
    if settings["kind"] == "slurm":
        return int(settings.get("array_parallelism") or 1)
    if local_gpus(settings):  # each job holds the GPUs it names; submitit gives every job the same ones
        return 1
    per_job = int(cpus or settings.get("cpus") or 1)
    return max(1, (os.cpu_count() or 1) // per_job)


def visible_gpus() -> int:
    """NVIDIA GPUs this process may use, without importing torch: $CUDA_VISIBLE_DEVICES when set,
    else the lines of `nvidia-smi -L`; 0 without either."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return len([d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in done.stdout.splitlines()) if done.returncode == 0 else 0


def local_gpus(settings: Mapping[str, Any]) -> int:
    """GPUs of a local launcher's job: its `gpus` (an integer, or `all`: visible_gpus()), 0 when unset.
    submitit's LocalExecutor sets CUDA_VISIBLE_DEVICES to the first `gpus_per_node` GPUs, and to ""
    (no GPU) without it, so a job on a GPU machine sees none unless this is passed."""
    gpus = settings.get("gpus") or 0
    return visible_gpus() if gpus == "all" else int(gpus)


def thread_env(cpus: int) -> dict[str, str]:
    """Environment that caps torch/BLAS threads in a job at its CPU share."""
    return {"OMP_NUM_THREADS": str(cpus), "MKL_NUM_THREADS": str(cpus)}


def snapshot_code(dest: Path) -> Path:
    """Copy the importable `arena` package into `dest/arena`; returns `dest` (absolute).

    Jobs run with `dest` as their working directory and first PYTHONPATH entry, so they import
    this copy, not the live tree (which the user may edit while jobs wait in the queue).
    """
    dest = Path(dest).resolve()
    source = Path(arena.__file__).resolve().parent
    shutil.copytree(source, dest / "arena", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def make_executor(
    launcher: str,
    folder: Path,
    *,
    cfg: Mapping[str, Any] | None = None,
    timeout_min: int | None,
    cpus: int | None = None,
) -> submitit.Executor:
    """A submitit executor for `configs/launcher/<launcher>.yaml` (+ `cfg` overrides).

    `folder` holds submitit's logs and pickles (`%j` is added). `timeout_min` (when not None)
    and `cpus` (threads per job; CPUs per SLURM task) override the YAML. ValueError lists the
    valid launchers or keys on bad input.
    """
    settings = _settings(launcher, cfg)
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    kind = settings["kind"]
    if kind == "debug":
        return submitit.AutoExecutor(folder=folder / "%j", cluster="debug")
    timeout = timeout_min if timeout_min is not None else settings.get("timeout_min")
    if timeout is None:
        raise ValueError(f"launcher {launcher!r}: set timeout_min (argument or YAML key)")
    threads = int(cpus or settings.get("cpus") or 1)
    exports = [f"export {k}={v}" for k, v in thread_env(threads).items()]
    max_num_timeout = int(settings.get("max_num_timeout", 3))
    if kind == "local":
        executor = submitit.LocalExecutor(folder=folder / "%j", max_num_timeout=max_num_timeout)
        gpus = {"gpus_per_node": local_gpus(settings)} if local_gpus(settings) else {}
        executor.update_parameters(timeout_min=int(timeout), setup=exports,
                                   signal_delay_s=int(settings.get("signal_delay_s", 30)), **gpus)
        return executor
    return _slurm_executor(settings, folder, timeout=int(timeout), threads=threads, exports=exports,
                           max_num_timeout=max_num_timeout)


def remove_empty_template_folder(folder: Path) -> None:
    """Remove `folder/%j` when it is empty: submitit's local job controller makes the folder named
    by the template itself (`mkdir` before the job id is put in), next to the real `<job id>/`
    folders, and leaves it empty."""
    try:
        (Path(folder) / "%j").rmdir()
    except OSError:  # absent, or (never by arena) not empty
        pass


def slurm_parameters(settings: Mapping[str, Any], *, timeout_min: int, cpus: int) -> dict:
    """submitit AutoExecutor parameters from a slurm launcher's settings (null keys left out)."""
    params = {SLURM_PARAMETERS[k]: settings[k] for k in SLURM_PARAMETERS if settings.get(k) is not None}
    params.update(timeout_min=timeout_min, cpus_per_task=cpus, nodes=1, tasks_per_node=1)
    if not params.get("gpus_per_node"):
        params.pop("gpus_per_node", None)  # no --gpus-per-node=0 on GPU-less partitions
    return params


def _slurm_executor(settings: dict, folder: Path, *, timeout: int, threads: int, exports: list[str],
                    max_num_timeout: int) -> submitit.Executor:
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise RuntimeError("launcher kind 'slurm' needs SLURM's sbatch and srun on PATH (not found)")
    (folder / "code").mkdir(exist_ok=True)
    code = snapshot_code(Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=folder / "code")))
    # The job's interpreter is this one (the project's venv), given as an absolute path.
    executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm",
                                     slurm_max_num_timeout=max_num_timeout,
                                     slurm_python=str(Path(sys.executable).absolute()))
    params = slurm_parameters(settings, timeout_min=timeout, cpus=threads)
    pythonpath = f"export PYTHONPATH={code}${{PYTHONPATH:+:$PYTHONPATH}}"
    executor.update_parameters(**params, slurm_setup=exports + [pythonpath],
                               slurm_additional_parameters={"chdir": str(code)})
    return executor


_SUBMITIT_REQUEUE = SlurmJobEnvironment._requeue


def requeue_with_sigterm_ignored(env: SlurmJobEnvironment, countdown: int) -> None:
    """submitit's requeue of a SLURM job from inside it (`scontrol requeue <job id>`), run with SIGTERM
    ignored, which `scontrol` inherits: SLURM's SIGTERMs to the job's processes (a preemption's, which
    can arrive after its SIGUSR2, and the requeue's own) cannot kill it before or after it asks for
    the requeue, so its exit status is the requeue's (docs/testbed.md, "The SLURM requeue's own
    SIGTERM"). A failed `scontrol` raises, as in submitit. Call from the main thread (submitit calls it
    from its SIGUSR2 handler); SIGTERM's handler is put back after (submitit's only logs it)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        _SUBMITIT_REQUEUE(env, countdown)
    finally:
        if previous is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, previous)


class CheckpointableJob(submitit.helpers.Checkpointable):
    """Runs `fn()` in a job; on preemption/timeout submitit requeues a fresh copy of it.

    `fn` is any picklable callable (e.g. `functools.partial(run_cell, cfg_dict)`) that resumes
    from its own on-disk checkpoint, so the requeued job carries no in-memory state. Inside the
    job, submitit's SLURM requeue is `requeue_with_sigterm_ignored`.
    """

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        SlurmJobEnvironment._requeue = requeue_with_sigterm_ignored  # in the process that runs the job
        return self.fn()

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        return submitit.helpers.DelayedSubmission(CheckpointableJob(self.fn), *args, **kwargs)


def submit(executor: submitit.Executor, fn: Callable[[], Any]) -> submitit.Job:
    """Submit one unit of work (a cell, a BC stage, a worker) as a requeueable job."""
    return executor.submit(CheckpointableJob(fn))


def start_after(executor: submitit.Executor, job_ids: list[str]) -> None:
    """SLURM only: the executor's next submissions start after every job in job_ids succeeded."""
    params = dict(executor._executor.parameters.get("additional_parameters") or {})
    params["dependency"] = "afterok:" + ":".join(job_ids)
    executor.update_parameters(slurm_additional_parameters=params)
