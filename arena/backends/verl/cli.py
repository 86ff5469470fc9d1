"""`arena verl-config key=value ...`: print the verl trainer config of a run (exit 0), or the
error with the valid choices (exit 2, `arena verl-config: <message>` like every verb). Keys
`verl.<dotted.path>=value` go into verl's config."""
from __future__ import annotations

from arena.cli_errors import EXIT_OK, print_bad_input


def verl_config_main(args: list[str]) -> int:
    from omegaconf import OmegaConf

    from arena.config.load import load_config
    from arena.config.verb_args import parse_overrides

    try:  # verl.<dotted.path>=value goes to verl's config (typed by Hydra's grammar), the rest is ours
        ours, extra = [], {}
        for arg, override in zip(args, parse_overrides(args)):
            if override.key_or_group.startswith("verl."):
                extra[override.key_or_group[len("verl."):]] = override.value()  # the last occurrence wins
            else:
                ours.append(arg)
        cfg = load_config(ours)
        # lazy: keeps numpy, torch, verl out of this module's import
        from .verl_config import build_verl_config

        verl_cfg = build_verl_config(cfg, extra)
    except ValueError as exc:  # BadConfig is a ValueError
        return print_bad_input("verl-config", exc)
    print(OmegaConf.to_yaml(verl_cfg), end="")
    return EXIT_OK
