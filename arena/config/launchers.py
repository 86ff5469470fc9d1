"""The launcher files `configs/launcher/<name>.yaml`: their names, their checked settings.

The config package owns every file under `configs/`; the sweep driver (arena.sweeps.launchers)
builds submitit executors from these settings and the verl backend's multi-node script
(arena.backends.verl.launch) reads a slurm launcher's resources from them
(docs/design.md, CLI).

Each file's `kind` picks the executor: `local` (subprocesses on this machine), `debug`
(in-process) or `slurm`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from omegaconf import OmegaConf

from .load import config_dir

KINDS = ("local", "debug", "slurm")
# The keys a launcher YAML of each kind may hold (every kind also has `kind`).
KEYS = {
    "local": ("cpus", "gpus", "timeout_min", "signal_delay_s", "max_num_timeout"),
    "debug": (),
    "slurm": ("partition", "gpus", "cpus", "mem_gb", "timeout_min", "qos", "account",
              "array_parallelism", "signal_delay_s", "max_num_timeout"),
}


def launcher_dir() -> Path:
    """`configs/launcher/` (follows $ARENA_CONFIG_DIR like the rest of the config)."""
    return config_dir() / "launcher"


def launcher_names() -> list[str]:
    return sorted(p.stem for p in launcher_dir().glob("*.yaml"))


def check_launcher_keys(name: str, settings: Mapping[str, Any]) -> None:
    """ValueError naming the valid kinds or keys when `settings` is not a launcher of its kind."""
    kind = settings.get("kind")
    if kind not in KINDS:
        raise ValueError(f"launcher {name!r}: kind={kind!r}; valid kinds: {', '.join(KINDS)}")
    valid = ("kind",) + KEYS[kind]
    bad = sorted(set(settings) - set(valid))
    if bad:
        raise ValueError(f"launcher {name!r} ({kind}): unknown keys {bad}; valid keys: {', '.join(valid)}")


def launcher_config(name: str) -> dict:
    """The settings of `configs/launcher/<name>.yaml` as a plain dict (with its `kind`)."""
    names = launcher_names()
    if name not in names:
        raise ValueError(f"unknown launcher {name!r}; valid launchers: {', '.join(names)}")
    settings = OmegaConf.to_container(OmegaConf.load(launcher_dir() / f"{name}.yaml"), resolve=True)
    settings = dict(settings or {})
    check_launcher_keys(name, settings)
    return settings
