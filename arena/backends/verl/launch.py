"""What a verl run needs on the machine, and the multi-node SLURM script (issue #7 item 5).

- `missing_packages()` / `missing_for_training()`: what is absent here, as readable items; the
  CLI turns a non-empty list into exit 2 before anything launches.
- `render_sbatch(...)`: `templates/ray_on_slurm.sbatch` with the job's values filled in;
  `write_sbatch(cfg, dest, nodes=N)` saves the run config beside the rendered script. The
  script's driver runs `python -m arena.backends.verl.main <config.yaml>`.

Single-node runs (`arena train`, sweep jobs through submitit) need no script: `main.run_training`
starts a private Ray head itself (`ray_head.RayHead`).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

TEMPLATE = Path(__file__).resolve().parent / "templates" / "ray_on_slurm.sbatch"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
# package -> why a verl run needs it
REQUIRED_PACKAGES = {
    "verl": "the trainer, 0.9.1",
    "ray": "verl's process manager",
    "vllm": "verl's rollout engine",
}
INSTALL_HINT = "pip install 'arena[gpu]'"


def missing_packages() -> list[str]:
    """Required packages that are not importable here (checked without importing them)."""
    return [f"{name} ({why})" for name, why in REQUIRED_PACKAGES.items() if importlib.util.find_spec(name) is None]


def gpus_per_node() -> int:
    """GPUs per node of this run: $ARENA_VERL_GPUS_PER_NODE (set by the multi-node script from
    SLURM's allocation), else the CUDA devices this process sees."""
    if os.environ.get("ARENA_VERL_GPUS_PER_NODE"):
        return int(os.environ["ARENA_VERL_GPUS_PER_NODE"])
    from .ray_head import visible_gpu_count

    return visible_gpu_count()


def node_count() -> int:
    """Nodes of this run: $ARENA_VERL_NNODES (multi-node script), else 1."""
    return int(os.environ.get("ARENA_VERL_NNODES") or 1)


def missing_for_training() -> list[str]:
    """`missing_packages()` plus a CUDA GPU (verl's FSDP workers and vLLM need one)."""
    missing = missing_packages()
    if gpus_per_node() == 0:
        missing.append("a CUDA GPU (torch.cuda.is_available() is False and ARENA_VERL_GPUS_PER_NODE is unset)")
    return missing


def describe_missing(missing: list[str]) -> str:
    return f"backend=verl cannot run here; missing: {'; '.join(missing)}. Install with {INSTALL_HINT} on a GPU machine."


def render_sbatch(*, config_path: Path, nodes: int, settings: Mapping[str, Any], log_dir: Path,
                  job_name: str = "arena-verl", python: Optional[str] = None,
                  pythonpath: Optional[str] = None) -> str:
    """The multi-node script: `settings` are a slurm launcher's keys (configs/launcher/slurm.yaml:
    partition, gpus, cpus, mem_gb, timeout_min, qos, account); ValueError on a missing one."""
    if nodes < 1:
        raise ValueError(f"nodes={nodes}; valid: an integer >= 1")
    needed = ("gpus", "cpus", "mem_gb", "timeout_min")
    absent = [k for k in needed if settings.get(k) in (None, 0)]
    if absent:
        raise ValueError(f"launcher settings miss {absent}; valid keys: {', '.join(needed + ('partition', 'qos', 'account'))}")
    optional = {"partition": settings.get("partition"), "qos": settings.get("qos"), "account": settings.get("account")}
    values = {
        "job_name": job_name, "nodes": nodes, "gpus_per_node": int(settings["gpus"]),
        "cpus_per_task": int(settings["cpus"]), "mem_gb": int(settings["mem_gb"]), "time_min": int(settings["timeout_min"]),
        "log_dir": Path(log_dir).resolve(),
        "optional_sbatch_lines": "\n".join(f"#SBATCH --{k}={v}" for k, v in optional.items() if v),
        "python": shlex.quote(str(Path(python or sys.executable).absolute())),
        "config_path": shlex.quote(str(Path(config_path).resolve())),
        "pythonpath": shlex.quote(pythonpath or str(Path(__file__).resolve().parents[3])),
    }
    text = TEMPLATE.read_text()
    unknown = sorted(set(PLACEHOLDER.findall(text)) - set(values))
    if unknown:
        raise ValueError(f"template placeholders without a value: {unknown}")
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)


def write_sbatch(cfg, dest: Path, *, nodes: int, launcher: str = "slurm",
                 settings: Optional[Mapping[str, Any]] = None) -> Path:
    """Save `cfg` as dest/config.yaml and the rendered script as dest/ray_on_slurm.sbatch
    (submit it with `sbatch`). `settings` default to configs/launcher/<launcher>.yaml."""
    from omegaconf import OmegaConf

    if settings is None:
        from arena.sweeps.launchers import launcher_config

        settings = launcher_config(launcher)
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    script = dest / "ray_on_slurm.sbatch"
    script.write_text(render_sbatch(config_path=dest / "config.yaml", nodes=nodes, settings=settings,
                                    log_dir=dest / "slurm", job_name=f"arena-verl-{cfg.env.name}-s{cfg.seed}"))
    (dest / "slurm").mkdir(exist_ok=True)
    return script
