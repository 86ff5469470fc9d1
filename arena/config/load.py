"""Compose a run's config with Hydra's compose API, validate it, and hash it into a cell id.

`load_config(["env=sokoban", "po.method=gspo", "steps=5"])` -> DictConfig. Any bad key, value
or group option raises BadConfig (a ValueError) whose message lists what is valid; the CLI
turns it into exit code 2.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from omegaconf import DictConfig, OmegaConf

from arena.envs import EnvUnavailableError, check_available, eval_size, validation_size

from .args import BadArgument, comma_list_message, hydra_key_message, unknown_key_message
from .ranges import RangeError, check_env_kwargs, check_ranges
from .schema import CHOICES, RunConfig
from .verb_args import sweep_only_keys, sweep_only_message
from .verb_grammar import parse_overrides

# Dict-typed namespaces whose keys are checked later (by the composer / env constructor).
OPEN_NAMESPACES = ("po.hp.", "env.kwargs.", "env.po_defaults.", "verl.")
# Keys that do not change what a run computes (docs/design.md, Run folder). tool_sandbox: a
# record in config.yaml, not a key. dimension, seeds, launcher, fail_fast: the sweep's own keys
# (arena.config.verb_args.SweepArgs), which RunConfig held once; a config.yaml written then holds
# them, and it must still hash to its folder's id (arena.runs.folder.summary_owner reads one).
NOT_IN_CELL_ID = ("out", "results_dir", "name", "arm", "stability", "search", "wandb", "tool_sandbox",
                  "dimension", "seeds", "launcher", "fail_fast")
# Keys added after results existed, hashed only off their default so that earlier cells keep
# their ids (a resumed sweep finds its result files): (section, key) -> default.
# A top-level key has the section None.
HASHED_OFF_DEFAULT = {(None, "verl"): {}, ("eval", "final_window"): True, ("bc", "pad_per_batch"): False, ("bc", "group_by_length"): False, (None, "sort_micro_batches"): "auto"}
# model: a pretrained LLM's recipe (configs/model/<name>.yaml, docs/verl.md); the group sets
# model.* and the run keys its recipe needs, the `model` section stays the schema's
GROUPS = ("env", "budget", "model")


class BadConfig(ValueError):
    """A user error in the config: exit code 2 with the valid choices listed."""


def config_dir() -> Path:
    """`configs/` at the repository root, or $ARENA_CONFIG_DIR."""
    if os.environ.get("ARENA_CONFIG_DIR"):
        return Path(os.environ["ARENA_CONFIG_DIR"]).resolve()
    return (Path(__file__).resolve().parents[2] / "configs").resolve()


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


@functools.lru_cache(maxsize=1)
def valid_keys() -> tuple[str, ...]:
    """Every key of the schema (dotted), the config groups and the open namespaces' roots."""
    return (*GROUPS, *_valid_keys())


def _valid_keys(node: Any = None, prefix: str = "") -> list[str]:
    node = OmegaConf.structured(RunConfig) if node is None else node
    keys = []
    for k, v in node.items_ex(resolve=False) if hasattr(node, "items_ex") else node.items():
        path = f"{prefix}{k}"
        if isinstance(v, DictConfig) and not (path + ".").startswith(OPEN_NAMESPACES) and path not in ("po.hp", "env.kwargs", "env.po_defaults", "verl"):
            keys += _valid_keys(v, path + ".")
        else:
            keys.append(path)
    return keys


def _normalise(overrides: Iterable[str] | Mapping[str, Any]) -> list[str]:
    return [ov for ov, _ in _normalise_parsed(overrides)]


def _normalise_parsed(overrides: Iterable[str] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(override as Hydra gets it, Hydra's parse of it) for each override: every key checked
    (check_key), an open namespace's keys made `++` (add or replace). Read with the one grammar
    (arena.config.verb_grammar.parse_overrides); BadConfig for what it does not parse."""
    if isinstance(overrides, Mapping):
        overrides = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in overrides.items()]
    overrides = list(overrides)
    try:
        parsed = parse_overrides(overrides)
    except BadArgument as exc:
        raise BadConfig(str(exc)) from exc
    out = []
    for ov, override in zip(overrides, parsed):
        key = override.key_or_group
        check_key(key, ov)
        if key.startswith(OPEN_NAMESPACES) and not ov.startswith(("+", "~")):
            ov = "++" + ov  # open dicts: add or replace
        out.append((ov, override))
    return out


def _check_group(key: str, override) -> None:
    """BadConfig unless a config group's override names one of its files (`env=sokoban`): a comma
    list is Hydra's multirun syntax, a list or another name is no file of the group."""
    if override.is_sweep_override():
        raise BadConfig(comma_list_message(key, ",".join(map(str, override.value().list))))
    value = "" if override.is_delete() else override.value()
    value = value if isinstance(value, str) else override.get_value_element_as_str()  # a list: `[a,b]`
    if value not in group_options(key):
        raise BadConfig(f"unknown {key} {value!r}; valid: {', '.join(group_options(key))}")


def check_key(key: str, arg: str = "") -> None:
    """BadConfig for a key no run reads, before Hydra sees it: `hydra.*` (Hydra's app settings,
    which compose ignores), `launcher.*` (a launcher's settings live in its file), a key of
    `arena sweep` (`seeds=3` is not three runs: arena.config.verb_args.sweep_only_keys), and a key
    outside the schema, `+foo=1` included (Hydra would add it: it would do nothing, yet change
    every cell id). The message names the close matches only."""
    if key == "hydra" or key.startswith("hydra."):
        raise BadConfig(hydra_key_message(key))
    if key.startswith("launcher."):  # (config/launchers.py reads those files; it imports this module)
        raise BadConfig(f"{key}: a launcher's settings live in its file, configs/launcher/<name>.yaml, and launcher= "
                        f"takes the file's name (valid: {', '.join(group_options('launcher'))}); to change one, copy "
                        f"configs/launcher/slurm.yaml to configs/launcher/<mine>.yaml, edit it, and pass launcher=<mine>")
    if key in valid_keys() or key.startswith(OPEN_NAMESPACES):
        return
    if key in sweep_only_keys():
        raise BadConfig(sweep_only_message(key, arg.lstrip("+~") or f"{key}=..."))
    raise BadConfig(unknown_key_message(key, valid_keys()))


def load_config(overrides: Iterable[str] | Mapping[str, Any] = ()) -> DictConfig:
    """Compose `configs/config.yaml` + overrides against the schema; BadConfig on bad input."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    # lazy: keeps hydra out of this module's import
    from .store import register

    register()
    normalised = _normalise_parsed(overrides)
    for _, override in normalised:
        if override.key_or_group in GROUPS:
            _check_group(override.key_or_group, override)
    overrides = [ov for ov, _ in normalised]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = compose("config", overrides=overrides)
    except MissingConfigException as exc:
        raise BadConfig(str(exc).split("\nConfig search path")[0]) from exc
    except OverrideParseException as exc:  # e.g. a value with a space or a bracket, unquoted
        raise BadConfig(f"not an override arena can parse: {str(exc).splitlines()[0]}; valid: key=value, with "
                        f"values holding spaces or special characters in quotes (key='a b')") from exc
    except ConfigCompositionException as exc:
        raise BadConfig(_composition_message(exc)) from exc
    finally:
        GlobalHydra.instance().clear()
    validate(cfg)
    return cfg


def _composition_message(exc: Exception) -> str:
    """Hydra's ConfigCompositionException as the one line a person needs."""
    msg = str(exc).split("\n")[0]
    cause = f": {exc.__cause__}" if exc.__cause__ else ""
    if msg.startswith("Ambiguous value for argument"):  # `po.method=grpo,gspo`: Hydra's multirun syntax
        key, _, value = msg.split("'", 2)[1].partition("=")
        return comma_list_message(key, value)
    if "Could not override" in msg:
        return unknown_key_message(msg.split("'")[1], valid_keys())
    return f"{msg}{cause}".split("\n    full_key")[0]


def validate(cfg: DictConfig) -> None:
    """The checks after composition (also run on configs edited in place, e.g. a sweep's arm
    overrides applied to a composed base): every CHOICES key holds a valid value, numeric keys
    are in range, env.kwargs are the environment's, and po.* resolves against the registries.
    BadConfig names the valid choices."""
    canonical_method(cfg)
    for key, valid in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in valid:
            raise BadConfig(f"unknown {key} {value!r}; valid: {', '.join(valid)}")
    try:
        check_ranges(cfg)  # steps=-3, save_freq=0, ... (ranges.py)
        check_env_kwargs(cfg)  # a typo inside env.kwargs
    except RangeError as exc:
        raise BadConfig(str(exc)) from exc
    resolve_po(cfg)  # validates po.* against the registries (raises BadConfig)
    if cfg.verl and cfg.backend != "verl":
        raise BadConfig(f"verl.* keys ({', '.join(sorted(cfg.verl))}) set verl's own config; valid only with backend=verl")
    if cfg.sort_micro_batches not in ("auto", True, False):
        raise BadConfig(f"sort_micro_batches={cfg.sort_micro_batches!r}: valid: auto, true, false")
    if cfg.sort_micro_batches is True and cfg.po.agg_norm != "global":
        raise BadConfig(f"sort_micro_batches=true needs po.agg_norm=global (got {cfg.po.agg_norm}: its "
                        "denominators depend on which rows share a micro-batch); valid: po.agg_norm=global, "
                        "or sort_micro_batches=auto|false")


def canonical_method(cfg: DictConfig) -> None:
    """`po.method=SAPO_SM` is `po.method=sapo_sm`: method names are matched case-insensitively
    (the papers and the README write them in capitals) and stored as the preset's own name, so
    the cell id is the same whichever case was typed."""
    # lazy: keeps torch out of this module's import
    from arena.po.methods import METHODS

    method = cfg.po.method
    if isinstance(method, str) and method not in METHODS:
        cfg.po.method = next((name for name in METHODS if name.lower() == method.lower()), method)


def check_env_available(cfg: DictConfig) -> None:
    """BadConfig unless the environment's optional package and data are there (env=alfworld
    needs ALFWORLD_DATA): `arena.envs.check_available`. What the backend needs is the backend
    table's to check (arena.backends.check_trainable, which calls this)."""
    try:
        check_available(str(cfg.env.name), **to_plain(cfg.env.kwargs))
    except EnvUnavailableError as exc:
        raise BadConfig(str(exc)) from exc
    check_validation_split(cfg)
    check_eval_split(cfg)


def trains_bc(cfg: DictConfig) -> bool:
    """Whether the run's start is a BC checkpoint (trained or cached): no `model.path`, or
    bc.source=rejection, which fine-tunes `model.path` on its own won rollouts."""
    return not cfg.model.path or cfg.bc.source == "rejection"


def check_validation_split(cfg: DictConfig) -> None:
    """BadConfig when BC's band stop would ask for more validation episodes than the environment
    has (`bc.val_n` > arena.envs.validation_size): the extra ones would be training episodes.
    A split of 0 (household's committed pool) is allowed; BC says so in its log and bc.json."""
    if not (trains_bc(cfg) and cfg.bc.steps > 0 and cfg.bc.band):
        return
    size = validation_size(str(cfg.env.name), **to_plain(cfg.env.kwargs))
    if size and cfg.bc.val_n > size:
        raise BadConfig(f"bc.val_n={cfg.bc.val_n} asks for more validation episodes than env {cfg.env.name} has "
                        f"({size} with env.kwargs={to_plain(cfg.env.kwargs)}); valid: bc.val_n <= {size}")


def check_eval_split(cfg: DictConfig) -> None:
    """BadConfig when an eval asks for more held-out episodes than the environment has distinct
    ones (`eval.n` or `bc.eval_n` > arena.envs.eval_size): eval_seed(i) would replay episode
    i mod size, and the success rate's standard error would count the repeats as new samples."""
    size = eval_size(str(cfg.env.name), **to_plain(cfg.env.kwargs))
    if size is None:
        return
    asked = {"eval.n": int(cfg.eval.n)}
    if trains_bc(cfg):
        asked["bc.eval_n"] = int(cfg.bc.eval_n)
    for key, n in asked.items():
        if n > size:
            raise BadConfig(f"{key}={n} asks for more held-out episodes than env {cfg.env.name} has ({size} distinct "
                            f"with env.kwargs={to_plain(cfg.env.kwargs)}); valid: {key} <= {size}")


def resolve_po(cfg: DictConfig):
    """The run's ResolvedPO (preset + env po_defaults + po.* overrides)."""
    # lazy: keeps torch out of this module's import
    from arena.po.compose import resolve

    po = {k: v for k, v in to_plain(cfg.po).items() if v is not None}
    try:
        return resolve(po, to_plain(cfg.env.po_defaults))
    except ValueError as exc:
        raise BadConfig(str(exc)) from exc


def to_plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def without_hashed_defaults(plain: dict) -> dict:
    """`plain` (a config as plain dicts) without the HASHED_OFF_DEFAULT keys that are at their default."""
    plain = dict(plain)
    for (section, key), default in HASHED_OFF_DEFAULT.items():
        if section is None and plain.get(key, default) == default:
            plain.pop(key, None)
        elif isinstance(plain.get(section), dict) and plain[section].get(key, default) == default:
            plain[section] = {k: v for k, v in plain[section].items() if k != key}
    return plain


def cell_id(cfg: DictConfig) -> str:
    """A hash of the resolved config, without the keys that don't change the result."""
    plain = without_hashed_defaults({k: v for k, v in to_plain(cfg).items() if k not in NOT_IN_CELL_ID})
    plain["po"] = resolve_po(cfg).flat()
    blob = json.dumps(plain, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# what differs between the cells of one sweep: the seed, the arm and its PO (settings_hash leaves them out)
PER_CELL_KEYS = ("seed", "po")


def settings_hash(cfg: DictConfig, overrides: Any = ()) -> str:
    """A hash of the settings a sweep's cells share: the resolved config without the keys that
    don't change the result (as cell_id), the seed, the PO and the top-level keys an arm overrides
    (`overrides`: e.g. ppo_num_mini_batches; po.* keys are in the PO already). Two runs of one
    budget at one code have the same hash; a budget whose defaults changed since has another."""
    skip = set(NOT_IN_CELL_ID) | set(PER_CELL_KEYS) | {str(k).split(".")[0] for k in overrides or ()}
    plain = without_hashed_defaults({k: v for k, v in to_plain(cfg).items() if k not in skip})
    blob = json.dumps(plain, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]
