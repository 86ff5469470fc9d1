"""What a verl run needs on the machine, and the multi-node SLURM script.

- `missing_packages(cfg)` / `missing_for_training(cfg)`: what is absent here for this run's
  `rollout.name` and `device`, as readable items; the CLI turns a non-empty list into exit 2
  before anything launches, naming `rollout.name=arena` / `device=cpu` as the way to run here
  when a GPU engine or a GPU is what is missing.
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

from arena.config.launchers import launcher_config
from arena.runs.layout import CONFIG_FILE

from . import ray_head
from .gpu_layout import CPUS_PER_GPU_BUNDLE, OTHER_ACTORS, VERL_DEFAULT_AGENT_WORKERS

TEMPLATE = Path(__file__).resolve().parent / "templates" / "ray_on_slurm.sbatch"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
# package -> why every verl run needs it
REQUIRED_PACKAGES = {
    "verl": "the trainer, 0.9.1",
    "ray": "verl's process manager",
}
# rollout.name -> (module it imports, package hint); "arena" needs nothing beyond arena itself
ROLLOUT_ENGINES = {
    "arena": None,
    "vllm": ("vllm", "verl's vLLM rollout engine"),
    "sglang": ("sglang", "verl's SGLang rollout engine"),
    "trtllm": ("tensorrt_llm", "verl's TensorRT-LLM rollout engine"),
}
INSTALL_HINT = "pip install 'arena[gpu-cu13]' (CUDA 13 driver) or 'arena[gpu-cu12]' (CUDA 12; docs/verl.md, Install)"
ARENA_ROLLOUT_MODULE = "arena.backends.verl.arena_rollout"  # registers rollout.name=arena in verl
# device=cpu: verl workers of a run (trainer.n_gpus_per_node, cpu_platform.cpu_overrides), one
# logical "GPU" slot each on the run's private Ray head (main.run_training)
CPU_RUN_WORKERS = 1
RUN_HERE_HINT = "rollout.name=arena (arena's own rollout: no vLLM, runs on CPU and CUDA)"


def rollout_name(cfg=None) -> str:
    """The run's rollout engine: cfg.rollout.name ("arena" when cfg is None or has no such key)."""
    from omegaconf import OmegaConf

    return "arena" if cfg is None else str(OmegaConf.select(cfg, "rollout.name", default="arena"))


def missing_packages(cfg=None) -> list[str]:
    """Required packages that are not importable here (checked without importing them): verl,
    ray, and the module of the run's rollout engine (none for rollout.name=arena)."""
    needed = dict(REQUIRED_PACKAGES)
    name = rollout_name(cfg)
    if name not in ROLLOUT_ENGINES:
        return [f"a known rollout engine (rollout.name={name}; valid: {', '.join(ROLLOUT_ENGINES)})"]
    if ROLLOUT_ENGINES[name] is not None:
        module, why = ROLLOUT_ENGINES[name]
        needed[module] = f"{why}, for rollout.name={name}"
    return [f"{module} ({why})" for module, why in needed.items() if importlib.util.find_spec(module) is None]


def gpus_per_node() -> int:
    """GPUs per node of this run: $ARENA_VERL_GPUS_PER_NODE (set by the multi-node script from
    SLURM's allocation), else the CUDA devices this process sees."""
    if os.environ.get("ARENA_VERL_GPUS_PER_NODE"):
        return int(os.environ["ARENA_VERL_GPUS_PER_NODE"])
    return ray_head.visible_gpu_count()  # through the module: a test stands in for it there


def node_count() -> int:
    """Nodes of this run: $ARENA_VERL_NNODES (multi-node script), else 1."""
    return int(os.environ.get("ARENA_VERL_NNODES") or 1)


def uses_gpu(cfg=None) -> bool:
    """True unless the run is `device=cpu` (then verl runs on the CPU: `cpu_platform`)."""
    from omegaconf import OmegaConf

    return cfg is None or str(OmegaConf.select(cfg, "device", default="cuda")) != "cpu"


def missing_for_training(cfg=None) -> list[str]:
    """`missing_packages(cfg)` plus a CUDA GPU unless device=cpu, and a CPU-capable rollout
    engine (rollout.name=arena) when device=cpu."""
    missing = missing_packages(cfg)
    if uses_gpu(cfg) and gpus_per_node() == 0:
        missing.append(f"a CUDA GPU ({cuda_problem()}; ARENA_VERL_GPUS_PER_NODE is unset); "
                       "device=cpu runs verl on the CPU")
    if not uses_gpu(cfg) and rollout_name(cfg) != "arena":
        missing.append(f"a rollout engine that runs on the CPU (rollout.name={rollout_name(cfg)} needs a GPU)")
    if rollout_name(cfg) == "arena" and importlib.util.find_spec(ARENA_ROLLOUT_MODULE) is None:
        missing.append(f"arena's rollout for verl ({ARENA_ROLLOUT_MODULE} is not importable)")
    return missing


def cuda_problem() -> str:
    """Why torch sees no CUDA GPU here, in torch.cuda's own words: a CPU build of torch, a driver
    too old for torch's CUDA build (a CUDA 13 torch on a CUDA 12 driver: docs/verl.md, Install),
    no driver at all."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU build (torch.version.cuda is None)"
    try:
        torch.cuda.init()
    except Exception as exc:  # torch.cuda's own error: "The NVIDIA driver on your system is too old (found ...)"
        error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "too old" in error:
            return (f"the NVIDIA driver is too old for torch {torch.__version__}, built for CUDA {torch.version.cuda}: "
                    f"{error} Install the torch/vLLM pair for the driver's CUDA major (docs/verl.md, Install: "
                    f"arena[gpu-cu12] for a CUDA 12 driver), or update the driver")
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU: {error}"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees {torch.cuda.device_count()} GPU(s)"


def describe_missing(missing: list[str], cfg=None) -> str:
    """The exit-2 message: what is missing, and the ways out (rollout.name=arena, unless the
    run already uses it; installing verl's GPU extra on a GPU machine)."""
    here = f"To run on this machine use {RUN_HERE_HINT}. " if cfg is None or rollout_name(cfg) != "arena" else ""
    return (f"backend=verl cannot run here; missing: {'; '.join(missing)}. {here}"
            f"For verl's GPU engines: {INSTALL_HINT} on a GPU machine.")


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
        "cpus_per_gpu": CPUS_PER_GPU_BUNDLE, "ray_cpus_other": VERL_DEFAULT_AGENT_WORKERS + OTHER_ACTORS,
        "signal_delay_s": int(settings.get("signal_delay_s") or 120),
        "max_requeues": int(settings.get("max_num_timeout") if settings.get("max_num_timeout") is not None else 3),
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
        settings = launcher_config(launcher)
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    script = dest / "ray_on_slurm.sbatch"
    script.write_text(render_sbatch(config_path=dest / CONFIG_FILE, nodes=nodes, settings=settings,
                                    log_dir=dest / "slurm", job_name=f"arena-verl-{cfg.env.name}-s{cfg.seed}"))
    (dest / "slurm").mkdir(exist_ok=True)
    return script
