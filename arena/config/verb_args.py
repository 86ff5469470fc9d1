"""One argument grammar for every verb (docs/design.md, CLI grammar and exit codes): a verb's
own keys are the fields of its argument dataclass (`SweepArgs`, `SearchArgs`, `StatusArgs`,
`ReportArgs`, `FindingsArgs`, `MethodsArgs`, `EnvsArgs`), and `parse_args(cls, args)` reads a
command line with Hydra's override grammar (`OverridesParser`), takes the dataclass's keys out
typed, and passes every other key through, in order, as run config overrides (for
`load_config`, that is Hydra's compose). A verb whose keys are a table (`eval`, `serve`) reads
them with the same grammar (`parse_key_values`).

The one precedence rule: the last occurrence of a key wins, everywhere. A verb key given twice
keeps its last value; a run override given twice reaches Hydra twice, and Hydra applies the
overrides in order; `last_value(overrides, key)` (e.g. the budget a sweep is named after) reads
them the same way.

A comment beside (or above) a field is its `--help` text (arena.config.field_docs); `--help`
lists the fields with their type and default (arena.cli_help). Pure and light: no torch, and
Hydra's parser only when a command line is parsed (`--help` and a bad flag exit fast).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Generic, Optional, Sequence, TypeVar

from .args import BadArgument, close_matches, comma_list_message

T = TypeVar("T")


@dataclass
class CellsArgs:
    """The keys `arena sweep` and `arena search` share: which cells, how they are launched."""
    env: Any = "sokoban"  # the environments, one or a list: env=[sokoban,household]
    envs: Any = None  # another spelling of env=[...] (give one of the two)
    seeds: Any = 3  # a count (3 = seeds 0-2), a list ([0,5,9]), or auto: seeds in rounds until each comparison is resolved (max_seeds)
    max_seeds: Optional[int] = None  # with seeds=auto: seeds per arm at most, an integer >= 2 (default 10); 3 first, then one per round to unresolved arms
    min_effect: Optional[float] = None  # with seeds=auto: the difference in points a "no difference" must rule out (default 5)
    launcher: str = "local"  # configs/launcher/<name>.yaml: local | debug | slurm | ...
    fail_fast: bool = False  # stop launching cells after the first failed one
    name: Optional[str] = None  # the sweep's folder under results_dir/sweeps; default <dimension>-<budget>
    timeout_min: Optional[int] = None  # minutes a cell may run (the launcher's timeout_min when unset)
    progress_s: float = 30.0  # seconds between progress lines
    dry_run: bool = False  # print the plan (cells, BC stages, launcher, wall-time estimate); write nothing (--dry-run)


@dataclass
class SweepArgs(CellsArgs):
    """`arena sweep`: a grid of arms x envs x seeds."""
    dimension: Optional[str] = None  # the grid of arms: arena/sweeps/grids/<dimension>.yaml (or one in $ARENA_GRIDS)
    grid: Optional[str] = None  # a grid file of your own instead of dimension=


@dataclass
class SearchArgs(CellsArgs):
    """`arena search`: a one-arm sweep of one method with the stability search on."""
    method: Optional[str] = None  # the preset to search (required; any case: SAPO_SM = sapo_sm)


@dataclass
class StatusArgs:
    """`arena status`: a sweep's state from disk alone."""
    name: Optional[str] = None  # the sweep; required
    results_dir: str = "results"  # where the sweeps are


# The points a "no difference" verdict must rule out unless min_effect= says otherwise: the
# report's MIN_EFFECT (arena.analysis.verdicts, which imports numpy; tests check they agree).
MIN_EFFECT = 5.0


@dataclass
class ReportArgs:
    """`arena report`: a sweep's tables and figures."""
    name: Optional[str] = None  # the sweep (results_dir/sweeps/<name>); required
    results_dir: str = "results"  # where the sweeps are
    baseline: Optional[str] = None  # the arm the others are compared with
    allow_mixed: bool = False  # report runs of mixed code/configs
    wandb: bool = False  # also log the tables and figures to W&B
    evals: bool = False  # instead of a sweep: the table of every `arena eval` run under results_dir/evals/ (docs/eval.md)
    min_effect: float = MIN_EFFECT  # points: the difference a "no difference" verdict must rule out (docs/methods.md, Statistics)


@dataclass
class FindingsArgs:
    """`arena findings`: the paper's findings tested on a results dir's sweeps or on run tables."""
    results_dir: str = "results"  # read every sweep under results_dir/sweeps/ (its report runs)
    csv: Optional[str] = None  # instead: committed run tables, one <name>_runs.csv file or a folder of them (docs/findings)
    out: Optional[str] = None  # also write out/findings.md and out/findings.csv
    min_effect: float = MIN_EFFECT  # points: the difference a "no difference" verdict must rule out


@dataclass
class MethodsArgs:
    """`arena methods`: the method presets."""
    method: Optional[str] = None  # one preset (default: all; any case: SAPO_SM = sapo_sm)


@dataclass
class EnvsArgs:
    """`arena envs play|check`: any key not here is one of the environment's env.kwargs."""
    env: str = "sokoban"  # the environment (configs/env/<name>.yaml)
    seed: int = 0  # the episode seed (play); valid: an integer >= 0
    n: int = 100  # episodes (check); valid: an integer >= 1
    make_pool: bool = False  # true: a run without a terminal may make the env's pool on first use (household: minutes)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    args: T  # the verb's dataclass, its keys typed
    given: frozenset  # the verb keys the command line set
    overrides: list  # every other key=value, in the command line's order (run config overrides)


def own_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a verb's dataclass, the ones its own class defines first (`dimension` before
    the shared `env`): the order `--help` lists them in."""
    own = cls.__dict__.get("__annotations__", {})
    fields = dataclasses.fields(cls)
    return [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]


def verb_keys(cls: type) -> list[str]:
    """A verb's own keys, in `--help`'s order."""
    return [f.name for f in own_fields(cls)]


def sweep_only_keys() -> tuple[str, ...]:
    """The keys of `arena sweep` that no run config has (dimension, seeds, launcher, fail_fast,
    ...): a one-config command (`arena train seeds=3`) refuses them, naming `arena sweep`."""
    from .schema import RunConfig

    run = {f.name for f in dataclasses.fields(RunConfig)}
    return tuple(k for k in verb_keys(SweepArgs) if k not in run)


def sweep_only_message(key: str, arg: str) -> str:
    return (f"{key}= is an option of `arena sweep` (it expands a grid and launches its cells); this command runs "
            f"one config here and would ignore it. valid: drop {key}=, or run `arena sweep dimension=NAME {arg} "
            f"...`; for one seed of a run use seed=N")


def parse_overrides(args: Sequence[str]) -> list:
    """Hydra's Override of each `key=value` (`+key=`, `++key=`, `~key`), one argument at a time so
    that an error names the argument; BadArgument for what Hydra's grammar does not parse."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser, out = OverridesParser.create(), []
    for arg in args:
        if "=" not in arg and not arg.startswith("~"):
            raise BadArgument(f"expected key=value, got {arg!r} (e.g. env=sokoban po.method=gspo)")
        try:
            out.append(parser.parse_override(arg))
        except HydraException as exc:  # Hydra's grammar: OverrideParseException, or its base from one override
            raise BadArgument(f"{arg!r} is not a valid value: not an override arena can parse "
                              f"({str(exc).splitlines()[0]}); valid: key=value, a list as key=[a,b], values "
                              f"holding spaces or special characters in quotes (key='a b')") from exc
    return out


def last_value(overrides: Sequence[str], key: str, default: Any = None) -> Any:
    """The value the overrides give `key` (the last occurrence wins), typed; `default` when none does."""
    found = [o for o in parse_overrides(overrides) if o.key_or_group == key and not o.is_delete()]
    return found[-1].value() if found else default


def _one_value(arg: str, override) -> Any:
    """The value of a verb's key=value: one value, so a comma list (Hydra's multirun syntax) and a
    `+key`/`~key` (adding to or deleting from a config) exit 2."""
    key = override.key_or_group
    if override.is_delete() or override.is_add() or override.is_force_add():
        raise BadArgument(f"{arg!r}: this command's {key}= takes one value, with no + or ~ (Hydra's adding to "
                          f"or deleting from a config); valid: {key}=VALUE")
    if override.is_sweep_override():
        raise BadArgument(comma_list_message(key, ",".join(map(str, override.value().list))))
    return override.value()


def _typed(field: dataclasses.Field, hints: dict, arg: str, override) -> Any:
    """The value of a verb key: one value (_one_value); a str key takes a number's text
    (`name=123`), a bool key takes true or false only. Ranges and the other types are the
    verb's to check, with messages naming what is valid (e.g. timeout_min, an integer >= 1)."""
    key, value = override.key_or_group, _one_value(arg, override)
    kind = hints[field.name]
    if kind in (str, Optional[str]) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return override.get_value_element_as_str()
    if kind is bool and not isinstance(value, bool):
        raise BadArgument(f"{key}={value!r}: valid: true or false")
    return value


def parse_args(cls: type[T], args: Sequence[str]) -> Parsed[T]:
    """The command line `args` as `cls`'s keys (typed, the last occurrence winning) and the run
    overrides (in order). `--dry-run` is `dry_run=true` (the one flag a verb takes besides
    --help, arena.config.args.VERB_FLAGS, for a dataclass with that field). BadArgument (exit 2)
    for a value Hydra's grammar does not parse, a comma list or a `+`/`~` on a verb key, and a
    bool key that is not true or false."""
    names = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values, overrides = {}, []
    args = ["dry_run=true" if a == "--dry-run" and "dry_run" in names else a for a in args]  # args.VERB_FLAGS
    for arg, override in zip(args, parse_overrides(args)):
        key = override.key_or_group
        if key not in names:
            overrides.append(arg)
            continue
        values[key] = _typed(names[key], hints, arg, override)  # the last occurrence wins
    return Parsed(cls(**values), frozenset(values), overrides)


def parse_own_args(cls: type[T], args: Sequence[str]) -> Parsed[T]:
    """parse_args for a verb that takes its own keys only (status, report, findings, methods):
    any other key exits 2 naming the close match and the valid keys."""
    parsed = parse_args(cls, args)
    other = parse_overrides(parsed.overrides)
    if other:
        raise unknown_verb_key(other[0].key_or_group, cls)
    return parsed


def parse_key_values(args: Sequence[str]) -> dict[str, Any]:
    """{key: typed value} of a verb whose keys are a table, not a dataclass (`envs`' env kwargs,
    `eval`'s and `serve`'s option tables): the same grammar, the last occurrence winning. A comma
    list and a `+`/`~` prefix exit 2 (one key, one value)."""
    return {override.key_or_group: _one_value(arg, override) for arg, override in zip(args, parse_overrides(args))}


def unknown_verb_key(key: str, cls: type) -> BadArgument:
    """`unknown key 'nmae'; did you mean name? valid keys: name, results_dir` for a verb that
    takes only its own keys (few enough to list)."""
    valid = verb_keys(cls)
    near = close_matches(key, valid)
    return BadArgument(f"unknown key {key!r}; {f'did you mean {near[0]}? ' if near else ''}valid keys: {', '.join(valid)}")


def type_name(kind: Any) -> str:
    """A field's type as `--help` writes it: `int | null`, `bool`, `any` (a count, list or word)."""
    if kind is Any:
        return "any"
    args = typing.get_args(kind)
    if typing.get_origin(kind) is typing.Union:
        return " | ".join("null" if a is type(None) else type_name(a) for a in args)
    return getattr(kind, "__name__", str(kind))


def verb_key_docs(cls: type) -> list:
    """`--help`'s lines for a verb's own keys: each field of `cls` (its own fields first) with its
    default and `(type) meaning`, the meaning read from the comment beside the field."""
    from .field_docs import KeyDoc, dataclass_docs

    docs, hints = {d.key: d for d in dataclass_docs(cls)}, typing.get_type_hints(cls)
    return [KeyDoc(f.name, docs[f.name].default, f"({type_name(hints[f.name])}) {docs[f.name].doc}")
            for f in own_fields(cls)]
