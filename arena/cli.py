"""`arena <verb> key=value ...` and `arena <verb> --help` (docs/design.md, CLI grammar and exit
codes). The exit codes and the error format are arena.cli_errors'; the help text is
arena.cli_help's, generated from where each key is defined.
"""
from __future__ import annotations

import errno
import sys
from typing import Callable, Sequence

import yaml

from arena.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput, print_bad_input  # noqa: F401
from arena.cli_help import VERB_HELP, help_text, overview

HELP_FLAGS = ("-h", "--help")


def parse_overrides(args: Sequence[str]) -> dict:
    """`key=value` pairs -> dict; values parsed as YAML scalars/lists (`seeds=[0,5]`)."""
    out = {}
    for arg in args:
        if "=" not in arg:
            raise BadInput(f"expected key=value, got {arg!r} (e.g. method=gspo env=sokoban)")
        key, _, raw = arg.partition("=")
        if not key:
            raise BadInput(f"empty key in {arg!r}")
        try:
            out[key] = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            out[key] = raw
    return out


def _methods(args: Sequence[str]) -> int:
    """List the method presets with their resolved members and hyperparameters."""
    from arena.po.compose import resolve
    from arena.po.methods import METHODS

    opts = parse_overrides(args)
    unknown = sorted(set(opts) - {"method"})
    if unknown:
        raise BadInput(f"unknown key(s) {unknown} for 'arena methods'; valid: method")
    names = [opts["method"]] if "method" in opts else list(METHODS)
    for name in names:
        try:
            po = resolve({"method": name})
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
        mask = "off" if po.seq_mask_delta is None else f"delta={po.seq_mask_delta:g}"
        hp = " ".join(f"{k}={v}" for k, v in po.hp.items())
        print(
            f"{name:9s} {po.group:11s} agg={po.aggregation:19s} clip={po.clipping:5s} mask={mask:11s} "
            f"filter={po.filtering:7s} adv={po.advantage:5s} {hp}\n{'':9s} cites: {METHODS[name].cite}"
        )
    return EXIT_OK


def _envs(args: Sequence[str]) -> int:
    """`arena envs play env=NAME seed=N` | `arena envs check env=NAME n=100`."""
    from arena.envs import ENVS, EnvUnavailableError
    from arena.envs import commands

    subs = {"play": commands.play, "check": commands.check}
    if not args or args[0] not in subs:
        raise BadInput(f"usage: arena envs {{{'|'.join(subs)}}} env=NAME ...; valid subcommands: {', '.join(subs)}")
    opts = parse_overrides(args[1:])
    env = opts.pop("env", "sokoban")
    if env not in ENVS:
        raise BadInput(f"unknown environment {env!r}; valid: {', '.join(sorted(ENVS))}")
    seed, n = int(opts.pop("seed", 0)), int(opts.pop("n", 100))
    make_pool = opts.pop("make_pool", False) is True  # a run without a terminal may make a pool (minutes)
    # the environment's kwargs from configs/env/<env>.yaml, then the command line's
    env_kwargs = {**_config([f"env={env}"]).env.kwargs, **opts}
    try:
        from arena.envs import announce_first_use

        announce_first_use(env, dict(env_kwargs), consent=make_pool)
        if args[0] == "play":
            return int(commands.play(env, seed, **env_kwargs) or 0)
        commands.check(env, n, **env_kwargs)
    except TypeError as exc:  # an unknown env kwarg
        raise BadInput(f"bad option for env {env!r}: {exc}") from exc
    except EnvUnavailableError as exc:  # e.g. env=alfworld without its package or data
        raise BadInput(str(exc)) from exc
    return EXIT_OK


def _config(args: Sequence[str]):
    from arena.config import BadConfig, load_config

    _refuse_sweep_only_keys(args)
    try:
        return load_config(list(args))
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc


def _refuse_sweep_only_keys(args: Sequence[str]) -> None:
    """`dimension=`, `seeds=`, `launcher=`, `fail_fast=` (arena.runs.layout.SWEEP_ONLY_KEYS) say
    how a sweep expands and where its jobs go; a one-config command (`arena train`, `arena bc`) would
    ignore them silently (`seeds=3` is not three runs), so they exit 2."""
    from arena.runs.layout import SWEEP_ONLY_KEYS

    for arg in args:
        key = arg.split("=", 1)[0].lstrip("+~")
        if key in SWEEP_ONLY_KEYS:
            raise BadInput(f"{key}= is an option of `arena sweep` (it expands a grid and launches its cells); this "
                           f"command runs one config here and would ignore it. valid: drop {key}=, or run "
                           f"`arena sweep dimension=NAME {arg} ...`; for one seed of a run use seed=N")


def _train(args: Sequence[str]) -> int:
    """`arena train key=value ...`: one RL run into `out` (default <results_dir>/runs/<cell_id>),
    on the backend `backend=` names (embedded | verl)."""
    from arena.backends import backend_of, check_trainable
    from arena.config import BadConfig
    from arena.runs.provenance import pin_git_state

    pin_git_state()  # the commit the run starts from (a checkout may move during a long run)
    cfg = _config(args)
    try:
        check_trainable(cfg)
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc
    return backend_of(cfg).train_fn()(cfg)


def _bc(args: Sequence[str]) -> int:
    """`arena bc env=...`: train (or find cached) the BC checkpoint and print its report."""
    from arena.config import BadConfig, check_env_available

    cfg = _config(args)
    try:  # the environment's package, data and (tool envs) sandbox, before any demo is collected
        check_env_available(cfg)
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc
    from arena.backends.embedded.bc import bc_dir, ensure_bc_checkpoint  # imports torch
    path = ensure_bc_checkpoint(cfg)
    print(f"[bc] checkpoint: {path}")
    print((bc_dir(cfg) / "bc.json").read_text())
    return EXIT_OK


def _report(args: Sequence[str]) -> int:
    """`arena report name=NAME [results_dir=...] [allow_mixed=true] [wandb=true]`."""
    from arena.analysis.report import main as report_main

    return report_main(list(args))


def _verl_config(args: Sequence[str]) -> int:
    """`arena verl-config key=value ...`: print the generated verl config."""
    from arena.backends.verl.cli import verl_config_main

    return verl_config_main(list(args))


def _evaluation(module: str, entry: str) -> Callable[[dict], int]:
    """`arena eval` / `arena serve` (arena/evaluation/, docs/eval.md)."""
    import importlib

    return getattr(importlib.import_module(f"arena.evaluation.{module}"), entry)


def _sweeps(verb: str) -> Callable[[Sequence[str]], int]:
    def run(args: Sequence[str]) -> int:
        from arena.sweeps import cli as sweep_cli

        return getattr(sweep_cli, f"{verb}_main")(list(args))

    run.__doc__ = f"`arena {verb} ...` (arena/sweeps/cli.py)"
    return run


VERBS: dict[str, Callable[[Sequence[str]], int]] = {
    "sweep": _sweeps("sweep"),
    "status": _sweeps("status"),
    "search": _sweeps("search"),
    "report": _report,
    "verl-config": _verl_config,
    "methods": _methods,
    "envs": _envs,
    "train": _train,
    "bc": _bc,
    "eval": lambda args: _evaluation("runner", "eval_main")(parse_overrides(args)),
    "serve": lambda args: _evaluation("server", "serve_main")(parse_overrides(args)),
}
assert set(VERBS) == set(VERB_HELP), "every verb has its --help (arena/cli_help.py VERB_HELP)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["help"] and argv[1:2]:  # `arena help train` = `arena train --help`
        argv = [argv[1], "--help"]
    if not argv or argv[0] in (*HELP_FLAGS, "help"):
        print(overview())
        return EXIT_OK if argv else EXIT_BAD_INPUT
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"arena: unknown verb {verb!r}; valid: {', '.join(VERBS)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if any(arg in HELP_FLAGS for arg in rest):
        print(help_text(verb))
        return EXIT_OK
    from arena.env_vars import BadEnvironment, check_environment

    try:  # every ARENA_* variable, before anything runs (arena/env_vars.py)
        check_environment(ignore=tuple(a.split("=", 1)[1] for a in rest if a.startswith("api_key_env=")))
    except BadEnvironment as exc:
        return print_bad_input(verb, exc)
    try:
        return VERBS[verb](rest)
    except BadInput as exc:
        return print_bad_input(verb, exc)
    except OSError as exc:  # a results_dir / out this user cannot write (read-only, not permitted)
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        return print_bad_input(verb, f"cannot write {exc.filename}: {exc.strerror}; valid: a results_dir= (or out=) "
                                     "this user can write")


if __name__ == "__main__":
    sys.exit(main())
