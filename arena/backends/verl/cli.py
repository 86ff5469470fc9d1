"""`arena verl-config key=value ...`: print the verl trainer config of a run (exit 0), or the
error with the valid choices (exit 2, `arena verl-config: <message>` like every verb). Keys
`verl.<dotted.path>=value` go into verl's config."""
from __future__ import annotations

import yaml

from arena.cli_errors import EXIT_OK, print_bad_input


def verl_config_main(args: list[str]) -> int:
    from omegaconf import OmegaConf

    from arena.config.load import load_config

    ours, extra = [], {}
    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep:
            return print_bad_input("verl-config", f"expected key=value, got {arg!r}")
        if key.startswith("verl."):
            extra[key[len("verl."):]] = yaml.safe_load(raw) if raw else raw  # YAML scalar or list
        else:
            ours.append(arg)
    try:
        cfg = load_config(ours)
        from .verl_config import build_verl_config

        verl_cfg = build_verl_config(cfg, extra)
    except ValueError as exc:  # BadConfig is a ValueError
        return print_bad_input("verl-config", exc)
    print(OmegaConf.to_yaml(verl_cfg), end="")
    return EXIT_OK
