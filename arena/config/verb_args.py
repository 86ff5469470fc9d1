"""One argument grammar for every verb (docs/design.md, CLI grammar and exit codes): a verb's
own keys are the fields of its argument dataclass (`SweepArgs`, `SearchArgs`, `StatusArgs`,
`ReportArgs`, `FindingsArgs`, `MethodsArgs`, `EnvsArgs`, `EvalArgs`, `ServeArgs`), and
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

A comment beside (or above) a field is its `--help` text (arena.config.field_docs); `--help`
lists the fields with their type and default (arena.cli_help). Pure and light: no torch, and
Hydra's parser only when a command line is parsed (`--help` and a bad flag exit fast).
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Mapping, Optional, Sequence, TypeVar

from .args import BadArgument, close_matches, comma_list_message, unknown_key_message
from .field_docs import KeyDoc, dataclass_docs
from .schema import RunConfig

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
    reuse: bool = True  # copy a cell another sweep under results_dir finished with the same config and code, instead of training it again


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
class TrainArgs:
    """`arena train`: its own keys; every other key is a run config key."""
    dry_run: bool = False  # print the run's config (backend=verl: the verl config it writes, as YAML); run and write nothing (--dry-run)
    launcher: Optional[str] = None  # backend=verl on SLURM: a slurm launcher (configs/launcher/) to submit the multi-node script with; none = run here
    nodes: int = 1  # with launcher=: the nodes of the multi-node job, an integer >= 1


@dataclass
class StatusArgs:
    """`arena status`: a sweep's state from disk alone."""
    name: Optional[str] = None  # the sweep; required
    results_dir: str = "results"  # where the sweeps are


# The points a "no difference" verdict must rule out unless min_effect= says otherwise: the
# report's one default, defined here (no numpy) and imported by arena.analysis.verdicts.
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


@dataclass
class DebateArgs:
    """`arena eval`'s debate.* keys."""
    agents: int = 3  # paradigm=*debate: agents per episode, an integer >= 2
    rounds: int = 2  # paradigm=*debate: rounds of answers, an integer >= 1


@dataclass
class RetryArgs:
    """`arena eval`'s retry.* keys: one request's retries (arena.evaluation.client)."""
    max: int = 5  # retries after the first attempt of one request, an integer >= 0
    backoff: float = 0.5  # seconds; exponential backoff with jitter when no Retry-After is given
    max_wait: float = 60.0  # cap on one wait, Retry-After included


EVAL_POLICIES = ("checkpoint", "openai")
EVAL_PARADIGMS = ("sla", "debate", "aggressive_debate")
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
OPENAI_MAX_TOKENS = 1024


@dataclass
class EvalArgs:
    """`arena eval`: its own keys (docs/eval.md, Keys); every other key (n=, seed=, env=,
    model.path, eval.temperature, out, ...) is a run config key. `checked(cfg)` checks the
    choices and ranges against the run config and fills in the defaults that depend on it; the
    eval pipeline (arena/evaluation/) reads the checked EvalArgs."""
    policy: str = "checkpoint"  # what plays: checkpoint (model.path, run here) | openai (an OpenAI-compatible endpoint)
    paradigm: str = "sla"  # sla (one agent) | debate | aggressive_debate (agents that see each other's answers; policy=openai)
    model: Optional[str] = None  # policy=openai: the model name sent to the endpoint
    base_url: str = "https://api.openai.com/v1"  # policy=openai: the endpoint, an http:// or https:// URL
    api_key_env: Optional[str] = "OPENAI_API_KEY"  # the variable holding the key; "" = send no key (a local `arena serve`)
    label: Optional[str] = None  # the row name in the report table; default: the model name / checkpoint folder
    debate: DebateArgs = field(default_factory=DebateArgs)
    concurrency: int = 4  # episodes (so requests) in flight at once, an integer >= 1
    retry: RetryArgs = field(default_factory=RetryArgs)
    timeout: float = 60.0  # seconds per attempt (connect and read)
    max_tokens: Optional[int] = None  # per reply; default: env.max_new_tokens (checkpoint), 1024 (openai)
    max_tokens_field: str = "max_tokens"  # max_completion_tokens for OpenAI reasoning models (o-series, gpt-5)
    sampling_params: bool = True  # send eval.temperature / eval.top_p; false = the endpoint's defaults
    chunk: int = 64  # policy=checkpoint: episodes per batched rollout (each chunk is cached)
    make_pool: bool = False  # true: a run without a terminal may make the env's pool on first use (household: minutes)
    sweep: Optional[str] = None  # NAME: evaluate the final policy of every finished cell of sweep NAME instead (sweep_eval.py)
    min_effect: float = MIN_EFFECT  # with sweep=: points a "no difference" verdict must rule out (docs/methods.md, Statistics)


    def checked(self, cfg) -> "EvalArgs":
        """These keys checked against their choices and ranges (BadArgument names the key and what
        is valid), with base_url's trailing / cut, api_key_env None as "", max_tokens filled in
        (env.max_new_tokens for a checkpoint, OPENAI_MAX_TOKENS for an endpoint), label = model
        for an endpoint (a checkpoint's label is its folder: the eval pipeline's), and one agent
        and one round for paradigm=sla (the debate keys do not apply, nor enter the eval id)."""
        if self.policy not in EVAL_POLICIES:
            raise BadArgument(f"unknown policy {self.policy!r}; valid: {', '.join(EVAL_POLICIES)}")
        if self.paradigm not in EVAL_PARADIGMS:
            raise BadArgument(f"unknown paradigm {self.paradigm!r}; valid: {', '.join(EVAL_PARADIGMS)}")
        self._check_policy(cfg)
        if self.max_tokens_field not in MAX_TOKENS_FIELDS:
            raise BadArgument(f"unknown max_tokens_field {self.max_tokens_field!r}; valid: {', '.join(MAX_TOKENS_FIELDS)}")
        if not isinstance(self.sampling_params, bool):
            raise BadArgument(f"sampling_params={self.sampling_params!r}; valid: true, false")
        sla = self.paradigm == "sla"
        default_tokens = OPENAI_MAX_TOKENS if self.policy == "openai" else cfg.env.max_new_tokens
        tokens = self.max_tokens if self.max_tokens is not None else default_tokens
        return dataclasses.replace(
            self, base_url=str(self.base_url).rstrip("/"), api_key_env=str(self.api_key_env or ""),
            label=self.label or (self.model if self.policy == "openai" else None),
            debate=DebateArgs(agents=1 if sla else _at_least("debate.agents", self.debate.agents, 2),
                              rounds=1 if sla else _at_least("debate.rounds", self.debate.rounds, 1)),
            concurrency=_at_least("concurrency", self.concurrency, 1),
            retry=RetryArgs(max=_at_least("retry.max", self.retry.max, 0),
                            backoff=_at_least("retry.backoff", self.retry.backoff, 0.0, float),
                            max_wait=_at_least("retry.max_wait", self.retry.max_wait, 0.0, float)),
            timeout=_at_least("timeout", self.timeout, 0.001, float), max_tokens=_at_least("max_tokens", tokens, 1),
            chunk=_at_least("chunk", self.chunk, 1))

    def _check_policy(self, cfg) -> None:
        """What each policy needs: an endpoint (openai) or a checkpoint folder (checkpoint, sla only)."""
        if self.policy == "openai":
            if not self.model or not isinstance(self.model, str):
                raise BadArgument("policy=openai needs model=NAME (the model id the endpoint serves)")
            if not str(self.base_url).startswith(("http://", "https://")):
                raise BadArgument(f"base_url={self.base_url!r}: expected an http:// or https:// URL")
            return
        if self.model is not None:
            raise BadArgument("model=NAME is for policy=openai; policy=checkpoint takes model.path=DIR")
        if not cfg.model.path:
            raise BadArgument("policy=checkpoint needs model.path=DIR (an arena or local HF checkpoint)")
        if not Path(cfg.model.path).is_dir():
            raise BadArgument(f"model.path={cfg.model.path!r}: no such checkpoint folder")
        if self.paradigm != "sla":
            raise BadArgument(f"paradigm={self.paradigm} needs a chat endpoint: serve the checkpoint "
                              "(arena serve model.path=...) and use policy=openai; valid for policy=checkpoint: sla")


def _at_least(key: str, value: Any, low: float, kind: type = int) -> Any:
    """`value` as `kind` (int: not a bool) when it is >= low; BadArgument naming the key otherwise."""
    words = "an integer" if kind is int else "a number"
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise BadArgument(f"{key}={value!r}: expected {words} >= {low}") from None
    if number < low or (kind is int and isinstance(value, bool)):
        raise BadArgument(f"{key}={value!r}: expected {words} >= {low}")
    return number


@dataclass
class ServeModelArgs:
    """`arena serve`'s model.* key."""
    path: Optional[str] = None  # required: a local checkpoint folder (an arena or Hugging Face model, or a run folder)


@dataclass
class ServeArgs:
    """`arena serve` (docs/eval.md, arena serve): its keys only."""
    model: ServeModelArgs = field(default_factory=ServeModelArgs)
    port: int = 8000  # the TCP port, an integer in 0..65535
    host: str = "127.0.0.1"  # the address to bind; there is no authentication, so 0.0.0.0 only on a trusted network
    served_name: Optional[str] = None  # the model id clients send and /v1/models lists; default: the folder's name
    device: str = "cpu"  # cpu | cuda
    max_tokens: Optional[int] = None  # a reply's token limit when the request names none; default 256 (an integer >= 1)
    max_model_len: Optional[int] = None  # prompt + max_tokens must fit it (else 400); default: the model's context
    max_body_bytes: Optional[int] = None  # a larger request body is refused (413); default 1 MiB
    request_timeout: Optional[float] = None  # seconds per request, waiting for the model included (else 504); default 600


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


def sweep_only_keys() -> tuple[str, ...]:
    """The keys of `arena sweep` that no run config has (dimension, seeds, launcher, fail_fast,
    ...): a one-config command (`arena train seeds=3`) refuses them, naming `arena sweep`."""
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
