"""The training backends as one table: name -> how a run trains, what it needs on this machine,
and how a sweep runs its cells (docs/design.md, CLI and Config resolution).

Every caller that depends on the backend (`arena train`, the sweep's jobs, its BC stage, the
config check before anything launches) reads this table; nothing else compares backend names.
A new backend is one `Backend` row here plus its name in the config schema's choices
(arena/config/schema.py CHOICES["backend"]; a test checks both name the same backends).

The train entries are "module:function" names, imported only when a run starts: the embedded
backend imports torch and the verl backend imports verl and Ray, which the driver of a sweep
(often a login node) must not need.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

from arena.backends.verl.launch import describe_missing, missing_for_training, missing_packages
from arena.config import BadConfig, check_env_available
from arena.runs.policy import NoPolicy, policy_folder


def nothing_missing(cfg) -> Optional[str]:
    """The embedded backend needs only arena's own dependencies (torch is in the base install)."""
    return None


def verl_missing_message(cfg) -> Optional[str]:
    """The exit-2 message when verl, Ray or the run's rollout engine are not importable here, or
    the config is wrong for verl (a `verl.*` key verl lacks, a pretrained model with toy settings:
    verl_config.config_problem). The GPU itself is checked when the run starts (a sweep's driver
    may be a GPU-less login node)."""
    missing = missing_packages(cfg)
    if missing:
        return describe_missing(missing)
    # lazy: keeps verl, Ray and torch out of this module's import (verl_config imports verl)
    from arena.backends.verl.verl_config import config_problem

    return config_problem(cfg)


def embedded_here_problem(cfg) -> Optional[str]:
    """device=cuda needs a CUDA GPU that torch can use on the machine the run runs on."""
    if str(cfg.device) != "cuda":
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (f"device=cuda, but torch {torch.__version__} finds no CUDA GPU here (its CUDA build: "
            f"{torch.version.cuda or 'none, a CPU build'}); valid: device=cpu, or a machine with a GPU")


def verl_here_problem(cfg) -> Optional[str]:
    """What verl's run_training checks first: its packages, the GPUs of device=cuda, a CPU rollout
    engine for device=cpu."""
    missing = missing_for_training(cfg)
    return describe_missing(missing, cfg) if missing else None


def no_problem(cfg) -> Optional[str]:
    """Nothing to report (the default of a backend's here_problem check)."""
    return None


@dataclass(frozen=True)
class Backend:
    name: str
    # "module:function"; the function takes the run's config and returns the exit code (0/1/2)
    train_entry: str
    # cfg -> the exit-2 message naming what this machine lacks for the run, or None
    missing_message: Callable[[object], Optional[str]]
    # cfg -> the exit-2 message naming what this machine lacks to run it now (a GPU), or None:
    # checked by `arena train` before any work, not by a sweep's driver (often a GPU-less login node)
    here_problem: Callable[[object], Optional[str]] = no_problem
    # Sweep cells run as `python -m <child_module> <cell>/<child_config>` in a child process
    # (None: in the job's own process, cell after cell)
    child_module: Optional[str] = None
    # The sweep trains the behaviour-cloning checkpoint of each (env, bc config) first (the
    # stage a run without `model.path` starts from)
    sweep_bc_stage: bool = False

    @property
    def cells_in_child_process(self) -> bool:
        return self.child_module is not None

    def train_fn(self) -> Callable:
        """The training function (imports the backend's heavy modules now)."""
        module, _, function = self.train_entry.partition(":")
        return getattr(importlib.import_module(module), function)


BACKENDS: dict[str, Backend] = {
    "embedded": Backend(
        name="embedded", train_entry="arena.backends.embedded.run:run_training",
        missing_message=nothing_missing, here_problem=embedded_here_problem, sweep_bc_stage=True),
    # Each verl run starts and stops its own Ray head and vLLM servers, which must not outlive
    # (or leak into) the next cell of a worker: its cells run in a child process.
    "verl": Backend(
        name="verl", train_entry="arena.backends.verl.main:run_training",
        missing_message=verl_missing_message, here_problem=verl_here_problem,
        child_module="arena.backends.verl.main"),
}


def backend_of(cfg) -> Backend:
    """The table row of `cfg.backend`; BadConfig naming the valid backends for an unknown one."""
    try:
        return BACKENDS[str(cfg.backend)]
    except KeyError:
        raise BadConfig(f"unknown backend {cfg.backend!r}; valid: {', '.join(BACKENDS)}") from None


def check_trainable(cfg) -> None:
    """BadConfig unless `cfg` can train here: its backend exists and has what it needs
    (backend=verl: verl, Ray and the engine of `rollout.name`), the environment's optional
    package and data are there (env=alfworld needs ALFWORLD_DATA), and a `model.path` naming a
    run folder holds the policy it asks for. The CLI turns it into exit 2 before anything launches."""
    backend = backend_of(cfg)
    message = backend.missing_message(cfg)
    if message:
        raise BadConfig(message)
    check_env_available(cfg)
    check_model_path(cfg)


def check_model_path(cfg) -> None:
    """BadConfig when `model.path` is a run folder without a final policy, or a step of one that
    was not saved (arena.runs.policy.policy_folder says which steps there are)."""
    if not cfg.model.path:
        return
    try:
        policy_folder(cfg.model.path)
    except NoPolicy as exc:
        raise BadConfig(f"model.path: {exc}") from None
