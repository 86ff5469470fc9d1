"""`arena verl-config key=value ...` and `arena train backend=verl ... --dry-run`: print the verl
trainer config the run would write to <run>/verl_config.yaml (exit 0; `main.run_verl_config`:
runtime, dataset and `verl.*` keys included, for `device` and the GPU count of this machine or
$ARENA_VERL_GPUS_PER_NODE / $ARENA_VERL_NNODES), or the error with the valid choices (exit 2,
`arena <verb>: <message>` like every verb). Nothing is written. Keys `verl.<dotted.path>=value`
go into verl's config (cfg.verl, verl_config.user_overrides).

When the run would train its BC start first, `actor_rollout_ref.model.path` is where that
checkpoint goes (verl_config.start_model_path), as the run writes it once it exists."""
from __future__ import annotations

import sys

from arena.cli_errors import EXIT_OK, print_bad_input
from arena.config.load import load_config
from arena.runs import RunFolder
from arena.runs.layout import run_dir

from .launch import INSTALL_HINT, missing_for_training
from .main import run_verl_config


def print_run_verl_config(cfg, verb: str = "verl-config") -> int:
    """Print the run's verl config as YAML on stdout; what this machine lacks for the run goes to
    stderr as a note (the config does not depend on it)."""
    from omegaconf import OmegaConf

    import importlib.util

    if importlib.util.find_spec("verl") is None:  # verl's own config and validation make the print
        return print_bad_input(verb, f"printing a verl config needs verl installed (not found); valid: "
                                     f"pip install 'arena[test]' (CPU), or {INSTALL_HINT}")

    try:
        verl_cfg = run_verl_config(cfg, RunFolder(run_dir(cfg)))
    except ValueError as exc:  # BadConfig is a ValueError
        return print_bad_input(verb, exc)
    missing = missing_for_training(cfg)
    if missing:
        print(f"# note: to run here this machine lacks: {'; '.join(missing)}", file=sys.stderr)
    print(OmegaConf.to_yaml(verl_cfg), end="")
    return EXIT_OK


def verl_config_main(args: list[str]) -> int:
    try:
        cfg = load_config(list(args) + ([] if any(a.startswith("backend=") for a in args) else ["backend=verl"]))
    except ValueError as exc:  # BadConfig is a ValueError
        return print_bad_input("verl-config", exc)
    return print_run_verl_config(cfg)
