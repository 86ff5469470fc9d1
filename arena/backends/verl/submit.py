"""`arena train backend=verl launcher=<slurm launcher> nodes=N`: the multi-node run through
SLURM (docs/verl.md, Multi-node). The run's verl config is built first for the launcher's GPUs
and N nodes (exit 2 on a bad one, before anything is written); then the run folder gets
config.yaml and ray_on_slurm.sbatch (launch.write_sbatch), and `sbatch` submits the script.
`--dry-run` prints the rendered script and writes nothing."""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from arena.cli_errors import EXIT_OK, BadInput
from arena.config.launchers import launcher_config
from arena.config.verb_args import sweep_only_message
from arena.runs import RunFolder
from arena.runs.layout import CONFIG_FILE, run_dir

from .launch import render_sbatch, write_sbatch
from .main import run_verl_config

DEFAULT_LAUNCHER = "slurm"


@contextmanager
def gpu_count(gpus_per_node: int, nodes: int):
    """$ARENA_VERL_GPUS_PER_NODE and $ARENA_VERL_NNODES set as the multi-node script sets them."""
    keys = ("ARENA_VERL_GPUS_PER_NODE", "ARENA_VERL_NNODES")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({keys[0]: str(gpus_per_node), keys[1]: str(nodes)})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def launcher_settings(cfg, launcher: str | None) -> dict:
    """The slurm launcher's settings; BadInput for another backend or launcher kind."""
    if str(cfg.backend) != "verl":
        own = sweep_only_message("launcher", f"launcher={launcher}") + "; " if launcher else ""
        raise BadInput(f"{own}launcher= and nodes= on arena train submit a multi-node verl run; backend="
                       f"{cfg.backend} runs here; valid: backend=verl")
    try:
        settings = launcher_config(launcher or DEFAULT_LAUNCHER)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    if settings["kind"] != "slurm" or not settings.get("gpus"):
        raise BadInput(f"launcher={launcher or DEFAULT_LAUNCHER} is kind {settings['kind']} with gpus="
                       f"{settings.get('gpus')}; valid: a slurm launcher with gpus >= 1 (configs/launcher/slurm.yaml)")
    return settings


def submit_main(cfg, launcher: str | None, nodes: int, *, dry_run: bool = False) -> int:
    settings = launcher_settings(cfg, launcher)
    run = RunFolder(run_dir(cfg))
    with gpu_count(int(settings["gpus"]), nodes):
        try:
            run_verl_config(cfg, run)  # the config the job's driver builds, checked here first
        except ValueError as exc:
            raise BadInput(f"bad verl config for {nodes} node(s) x {settings['gpus']} GPU(s): {exc}") from exc
    if dry_run:
        print(render_sbatch(config_path=run.path / CONFIG_FILE, nodes=nodes, settings=settings,
                            log_dir=run.path / "slurm", job_name=f"arena-verl-{cfg.env.name}-s{cfg.seed}"), end="")
        return EXIT_OK
    if shutil.which("sbatch") is None:
        raise BadInput("launcher= needs SLURM's sbatch on PATH (not found); valid: run on a SLURM login node, or "
                       "--dry-run to print the script")
    script = write_sbatch(cfg, run.path, nodes=nodes, settings=settings)
    done = subprocess.run(["sbatch", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise BadInput(f"sbatch {script} failed: {done.stderr.strip() or done.stdout.strip()}")
    print(f"[train] {done.stdout.strip()}: {nodes} node(s); script {script}; logs {Path(run.path) / 'slurm'}")
    return EXIT_OK
