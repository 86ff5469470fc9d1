"""One argument grammar for every verb (docs/design.md, CLI grammar and exit codes): a verb's
own keys are the fields of its argument dataclass (arena.config.verb_args), and
`parse_args(cls, args)` reads a command line with Hydra's override grammar (`OverridesParser`),
takes the dataclass's keys out typed, and passes every other key through, in order, as run
config overrides (for `load_config`, that is Hydra's compose). `eval` and `serve` have dotted
keys (`retry.max`, `model.path`): their dataclasses hold sections (`retry: RetryArgs`), read by
`parse_nested_args` into an OmegaConf structured config, which types each value; eval's
pipeline gets the dataclass itself (`nested_dataclass`), serve's the flat `{dotted key: value}`
dict of the keys given. `envs`' env kwargs are a table
read with the same grammar (`parse_key_values`).

The one precedence rule: the last occurrence of a key wins, everywhere. A verb key given twice
keeps its last value; a run override given twice reaches Hydra twice, and Hydra applies the
overrides in order; `last_value(overrides, key)` (e.g. the budget a sweep is named after) reads
them the same way.

A comment beside (or above) a field is its `--help` text (arena.config.field_docs, `verb_key_docs`).
Pure and light: no torch, and Hydra's parser only when a command line is parsed (`--help` and a
bad flag exit fast).
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any, Generic, Mapping, Optional, Sequence, TypeVar

from .args import BadArgument, close_matches, comma_list_message, unknown_key_message
from .field_docs import KeyDoc, dataclass_docs

T = TypeVar("T")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    args: T  # the verb's dataclass, its keys typed (parse_nested_args: the flat dict of the keys given)
    given: frozenset  # the verb keys the command line set
    overrides: Any  # every other key=value, in the command line's order (run config overrides; eval: {key: value})


def own_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a verb's dataclass, the ones its own class defines first (`dimension` before
    the shared `env`): the order `--help` lists them in."""
    own = cls.__dict__.get("__annotations__", {})
    fields = dataclasses.fields(cls)
    return [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]


def verb_keys(cls: type) -> list[str]:
    """A verb's own keys, in `--help`'s order."""
    return [f.name for f in own_fields(cls)]


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


def _typed(kind: Any, arg: str, override) -> Any:
    """The value of a verb key of type `kind`: one value (_one_value); a str key takes a number's
    text (`name=123`, `label=007`), a bool key takes true or false only. Ranges and the other
    types are the verb's to check, with messages naming what is valid (e.g. timeout_min, an
    integer >= 1)."""
    key, value = override.key_or_group, _one_value(arg, override)
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
        values[key] = _typed(hints[key], arg, override)  # the last occurrence wins
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
    """{key: typed value} of keys that are a table, not a dataclass's fields (`envs`' env kwargs,
    the run config keys of `eval`): the same grammar, the last occurrence winning. A comma list
    and a `+`/`~` prefix exit 2 (one key, one value)."""
    return {override.key_or_group: _one_value(arg, override) for arg, override in zip(args, parse_overrides(args))}


def leaf_fields(cls: type, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, type) of each leaf key of a verb's dataclass, in `--help`'s order: a field
    whose type is a dataclass is a section, whose fields are keys `section.field`
    (`retry.max`)."""
    hints, out = typing.get_type_hints(cls), []
    for f in own_fields(cls):
        kind = hints[f.name]
        out += leaf_fields(kind, f"{prefix}{f.name}.") if dataclasses.is_dataclass(kind) else [(prefix + f.name, kind)]
    return out


def leaf_defaults(cls: type) -> dict[str, Any]:
    """{dotted key: default} of a verb's dataclass (`{"retry.max": 5, ...}`), the flat table the
    eval and serve pipelines read."""
    instance = cls()
    return {key: functools.reduce(getattr, key.split("."), instance) for key, _ in leaf_fields(cls)}


KIND_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def type_message(key: str, value: Any, kind: Any) -> str:
    """`retry.max='many': expected an integer (retry.max is int)`."""
    kinds = typing.get_args(kind) if typing.get_origin(kind) is typing.Union else (kind,)
    words = " or ".join("null" if k is type(None) else KIND_WORDS.get(k, type_name(k)) for k in kinds)
    return f"{key}={value!r}: expected {words} ({key} is {type_name(kind)})"


def parse_nested_args(cls: type, args: Sequence[str], own_only: bool = False) -> Parsed[dict]:
    """`arena eval`'s and `arena serve`'s keys: the keys of `cls` (its leaves, dotted for its
    sections) typed by an OmegaConf structured config of `cls`, as the flat {dotted key: value}
    of the keys the command line gives (the last occurrence winning); every other key passes
    through, in order, as a run override, or exits 2 when `own_only`. A key under one of the
    sections of `cls` is never a run key: `debate.agentz=2` exits 2 with "did you mean
    debate.agents?"; a value OmegaConf cannot make the key's type exits 2 naming the key and
    its type; a section given a value (`retry=3`) exits 2 naming its keys."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    leaves = dict(leaf_fields(cls))
    sections = {key.split(".")[0] for key in leaves if "." in key}
    conf, given, overrides = OmegaConf.structured(cls), {}, []
    for arg, override in zip(args, parse_overrides(args)):
        key = override.key_or_group
        if not own_only and key not in leaves and key.split(".")[0] not in sections:
            overrides.append(arg)
            continue
        if key in sections:
            raise BadArgument(f"{key}= is a section, not a key; valid: "
                              f"{', '.join(f'{k}=VALUE' for k in leaves if k.startswith(key + '.'))}")
        value = _typed(leaves[key], arg, override) if key in leaves else _one_value(arg, override)
        try:  # OmegaConf's struct mode: an unknown key raises; its typed nodes convert or refuse the value
            OmegaConf.update(conf, key, value, merge=False)
        except (ConfigAttributeError, ConfigKeyError, ValidationError):
            raise BadArgument(type_message(key, value, leaves[key]) if key in leaves
                              else unknown_key_message(key, leaves)) from None
        given[key] = None  # a dict for the command line's order, each key once
    return Parsed({key: OmegaConf.select(conf, key) for key in given}, frozenset(given), overrides)


def nested_dataclass(cls: type[T], keys: Mapping[str, Any]) -> T:
    """`cls` with the flat {dotted key: value} `keys` set (`{"retry.max": 3}`: `retry.max` = 3),
    typed by an OmegaConf structured config of `cls` as parse_nested_args types them."""
    from omegaconf import OmegaConf

    conf = OmegaConf.structured(cls)
    for key, value in keys.items():
        OmegaConf.update(conf, key, value, merge=False)
    return OmegaConf.to_object(conf)


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
    """`--help`'s lines for a verb's own keys: each leaf key of `cls` (its own fields first, a
    section's as `section.key`) with its default and `(type) meaning`, the meaning read from
    the comment beside the field."""
    docs = {d.key: d for d in dataclass_docs(cls)}
    return [KeyDoc(key, docs[key].default, f"({type_name(kind)}) {docs[key].doc}") for key, kind in leaf_fields(cls)]
