"""The parts of the one `key=value` grammar that every verb shares (docs/design.md, CLI grammar
and exit codes): the flags a verb takes, the "did you mean" of an unknown key, and the messages
for Hydra syntax that arena does not use (a comma list, `hydra.*`, `--config-name`). The parser
and each verb's keys are arena.config.verb_args'.

Pure and light (no torch, no Hydra import), so `--help` and a bad flag exit fast.
"""
from __future__ import annotations

import difflib
from typing import Iterable, Sequence

# Flags every verb takes; the verbs in VERB_FLAGS take these too.
COMMON_FLAGS = ("-h", "--help")
VERB_FLAGS = {"sweep": ("--dry-run",), "search": ("--dry-run",), "train": ("--dry-run",)}
# Where the grids (the arms of a sweep) are explained; the path is the repository's.
GRID_README = "sweeps/grids/README.md"


class BadArgument(ValueError):
    """A user error in the command line: exit code 2 with what is valid."""


def close_matches(word: str, valid: Iterable[str], n: int = 4) -> list[str]:
    """The valid names closest to `word` (difflib's ratio >= 0.7), best first; also the ones that
    end with it (`method` -> `po.method`), since a dotted key is often given without its section."""
    valid = list(valid)
    suffix = [v for v in valid if v.endswith("." + word)]
    return list(dict.fromkeys(suffix + difflib.get_close_matches(word, valid, n=n, cutoff=0.7)))[:n]


def unknown_key_message(key: str, valid: Iterable[str], what: str = "key") -> str:
    """`unknown key 'po.methd'; did you mean po.method? (--help lists every key)`: only the
    close matches; the whole list belongs in --help."""
    near = close_matches(key, valid)
    hint = f"did you mean {' or '.join(near)}?" if near else "no valid key is close to it"
    return f"unknown {what} {key!r}; {hint} (--help lists every {what} with its meaning)"


def check_flags(verb: str, args: Sequence[str]) -> None:
    """BadArgument for an argument that starts with '-' and is not a flag of `verb`: arena takes
    `key=value`; Hydra's own flags (--config-name, --multirun, ...) do not apply, since arena
    composes configs/config.yaml itself."""
    flags = COMMON_FLAGS + VERB_FLAGS.get(verb, ())
    for arg in args:
        if not arg.startswith("-") or arg in flags:
            continue
        name = arg.split("=", 1)[0]
        if name in flags:  # `--dry-run=true`
            raise BadArgument(f"{arg!r}: {name} takes no value; valid: {name} alone, or "
                              f"{name.lstrip('-').replace('-', '_')}=true")
        hydra = " (a Hydra application flag: arena composes configs/config.yaml itself, pick a config with " \
                "env=, budget= and key=value)" if name.startswith(("--config", "--multirun", "-m", "--cfg")) else ""
        raise BadArgument(f"unknown flag {arg!r}{hydra}; valid flags: {', '.join(flags)}; everything else is key=value")


def comma_list_message(key: str, value: str) -> str:
    """What `po.method=grpo,gspo` (Hydra's multirun sweep syntax) means in arena."""
    if key in ("env", "envs"):
        return (f"{key}={value}: a comma list is Hydra's multirun syntax; several environments are a YAML list on "
                f"arena sweep: env=[{value}]")
    return (f"{key}={value}: a comma list is Hydra's multirun syntax, which arena does not use; one run takes one "
            f"value. Several values are the arms of a sweep: arena sweep dimension=NAME (or grid=PATH, a grid "
            f"file of your own; see {GRID_README})")


def hydra_key_message(key: str) -> str:
    return (f"{key}: hydra.* keys do nothing here (arena composes its config with Hydra's compose API, without "
            f"Hydra's app, job or output folders); valid: out=DIR for a run's folder, results_dir=DIR for "
            f"where runs and sweeps go")
