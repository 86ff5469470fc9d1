"""`arena <verb> key=value ...` and `arena <verb> --help` (docs/design.md, CLI grammar and exit
codes). The exit codes and the error format are arena.cli_errors'; the help text is
arena.cli_help's, generated from where each key is defined.
"""
from __future__ import annotations

import errno
import sys
from typing import Callable, Sequence

from arena import malloc_tuning
from arena.backends import backend_of, check_trainable, embedded_here_problem
from arena.backends.verl.cli import print_run_verl_config, verl_config_main
from arena.backends.verl.submit import submit_main
from arena.bc.key import bc_hash
from arena.cli_errors import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput, out_of_space,  # noqa: F401
                              out_of_space_message, print_bad_input)
from arena.cli_help import VERB_HELP, help_text, overview
from arena.cli_output import tolerate_closed_pipe
from arena.config import BadConfig, check_env_available, load_config
from arena.config.args import BadArgument, check_flags, close_matches
from arena.config.verb_args import EnvsArgs, EvalArgs, MethodsArgs, ReportArgs, ServeArgs, TrainArgs
from arena.config.verb_grammar import (Parsed, last_value, nested_dataclass, parse_args, parse_key_values,
                                       parse_nested_args, parse_own_args)
from arena.env_vars import BadEnvironment, check_environment
from arena.envs import ENVS, EnvKwargsError, EnvUnavailableError, announce_first_use, commands
from arena.evaluation import entry as evaluation_entry
from arena.runs import RunFolder
from arena.runs.layout import Results, run_dir
from arena.runs.provenance import pin_code_state
from arena.runs.run_log import recording, remembered_command
from arena.sweeps import cli as sweep_cli

HELP_FLAGS = ("-h", "--help")


def parse_overrides(args: Sequence[str]) -> dict:
    """`key=value` pairs -> {key: value}, values typed by Hydra's grammar (`seeds=[0,5]` a list,
    `n=3` an int), the last occurrence of a key winning (arena.config.verb_grammar.parse_key_values)."""
    return parse_key_values(args)


def _int_option(key: str, value: object, low: int) -> int:
    """`value` when it is an integer >= low; BadInput naming the key otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise BadInput(f"{key}={value!r}: valid: an integer >= {low}")
    return value


def _methods(args: Sequence[str]) -> int:
    """List the method presets with their resolved members and effective hyperparameters (the
    preset's own and every member's defaults: what a run of the preset uses unless env or po.hp.*
    overrides them)."""
    # lazy: keeps torch out of every verb's --help (arena.po imports torch)
    from arena.po.compose import resolve
    from arena.po.methods import METHODS

    wanted = parse_own_args(MethodsArgs, args).args.method
    names = list(METHODS) if wanted is None else [next((m for m in METHODS if m.lower() == wanted.lower()), wanted)]
    for name in names:
        try:
            po = resolve({"method": name})
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
        mask = "off" if po.seq_mask_delta is None else f"delta={po.seq_mask_delta:g}"
        hp = " ".join(f"{k}={v}" for k, v in po.effective_hp().items())  # the preset's and each member's defaults
        print(
            f"{name:9s} {po.group:11s} agg={po.aggregation:19s} clip={po.clipping:5s} mask={mask:11s} "
            f"filter={po.filtering:7s} adv={po.advantage:5s} {hp}\n{'':9s} cites: {METHODS[name].cite}"
        )
    return EXIT_OK


def _envs(args: Sequence[str]) -> int:
    """`arena envs play env=NAME seed=N` | `arena envs check env=NAME n=100`."""
    subs = {"play": commands.play, "check": commands.check}
    if not args or args[0] not in subs:
        raise BadInput(f"usage: arena envs {{{'|'.join(subs)}}} env=NAME ...; valid subcommands: {', '.join(subs)}")

    parsed = parse_args(EnvsArgs, args[1:])
    env = parsed.args.env
    if env not in ENVS:
        raise BadInput(f"unknown environment {env!r}; valid: {', '.join(sorted(ENVS))}")
    seed, n = _int_option("seed", parsed.args.seed, 0), _int_option("n", parsed.args.n, 1)
    # the environment's kwargs from configs/env/<env>.yaml, then the command line's (every other key)
    env_kwargs = {**_config([f"env={env}"]).env.kwargs, **parse_overrides(parsed.overrides)}
    try:
        # make_pool: a run without a terminal may make a pool (minutes)
        announce_first_use(env, dict(env_kwargs), consent=parsed.args.make_pool)
        if args[0] == "play":
            return int(commands.play(env, seed, **env_kwargs) or 0)
        commands.check(env, n, **env_kwargs)
    except (TypeError, EnvKwargsError) as exc:  # an unknown env kwarg, or one of the wrong type
        raise BadInput(f"bad option for env {env!r}: {exc}") from exc
    except EnvUnavailableError as exc:  # e.g. env=alfworld without its package or data
        raise BadInput(str(exc)) from exc
    return EXIT_OK


def _config(args: Sequence[str]):
    try:
        return load_config(list(args))
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc


def check_runs_here(cfg, *, backend: bool = True) -> None:
    """BadInput before any work (no demo collected, no folder made) when this machine cannot
    run `cfg`: `model.path` is not a local folder (arena downloads nothing at run time), or the
    backend lacks something here (arena.backends.Backend.here_problem: device=cuda without a
    CUDA GPU; verl's packages)."""
    from pathlib import Path

    if cfg.model.path and not Path(str(cfg.model.path)).expanduser().is_dir():
        raise BadInput(f"model.path={cfg.model.path!r} is not a folder on this machine (arena downloads nothing at "
                       f"run time); valid: a local Hugging Face model folder (fetch a Hub model first, e.g. "
                       f"`huggingface-cli download {cfg.model.path} --local-dir DIR`, then model.path=DIR), or no "
                       f"model.path (BC from a model built from model.*)")
    # `arena bc` trains on the embedded model kit whatever the backend: only its device matters
    problem = backend_of(cfg).here_problem(cfg) if backend else embedded_here_problem(cfg)
    if problem:
        raise BadInput(problem)


def _train(args: Sequence[str]) -> int:
    """`arena train key=value ...`: one RL run into `out` (default <results_dir>/runs/<cell_id>),
    on the backend `backend=` names (embedded | verl). The run folder records the command and
    what the run printed (arena.runs.run_log). `--dry-run` prints the run's config (backend=verl:
    the verl config it writes) and runs nothing; `launcher=<slurm launcher> nodes=N` (backend=verl)
    submits the multi-node script instead of running here (arena.backends.verl.submit)."""
    parsed = parse_args(TrainArgs, args)
    options = parsed.args
    nodes = _int_option("nodes", options.nodes, 1)
    cfg = _config(parsed.overrides)
    if options.launcher is not None or nodes > 1:
        return submit_main(cfg, options.launcher, nodes, dry_run=options.dry_run)
    if options.dry_run:
        return _dry_run(cfg)
    pin_code_state()  # the code the run starts from (a checkout may move during a long run)
    try:
        check_trainable(cfg)
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc
    check_runs_here(cfg)

    run = RunFolder(run_dir(cfg))
    if run.done:  # nothing runs, so command.txt and run.log stay as they are
        print(f"[train] already done: {run.summary_file}")
        return EXIT_OK
    with recording(run.path):
        return backend_of(cfg).train_fn()(cfg)


def _dry_run(cfg) -> int:
    """`arena train --dry-run`: backend=verl prints the verl config the run writes (what this
    machine lacks for it, on stderr); the embedded backend prints the resolved run config."""
    if str(cfg.backend) == "verl":
        return print_run_verl_config(cfg, "train")
    from omegaconf import OmegaConf

    print(OmegaConf.to_yaml(cfg), end="")
    return EXIT_OK


def _bc(args: Sequence[str]) -> int:
    """`arena bc env=...`: train (or find cached) the BC checkpoint and print its report."""
    cfg = _config(args)
    try:  # the environment's package, data and (tool envs) sandbox, before any demo is collected
        check_env_available(cfg)
    except BadConfig as exc:
        raise BadInput(str(exc)) from exc
    check_runs_here(cfg, backend=False)
    # lazy: keeps torch and transformers out of every verb's --help (bc.train imports them)
    from arena.bc.train import ensure_bc_checkpoint

    path = ensure_bc_checkpoint(cfg)
    print(f"[bc] checkpoint: {path}")
    print(Results.of(cfg).bc_report(bc_hash(cfg)).read_text())
    return EXIT_OK


def _report(args: Sequence[str]) -> int:
    """`arena report name=NAME [results_dir=...] [allow_mixed=true] [wandb=true]`, a sweep's report
    (arena/analysis/report.py), or `arena report evals=true [results_dir=...]`, the table of every
    `arena eval` run (arena/evaluation/table.py)."""
    try:
        parsed = parse_own_args(ReportArgs, list(args))
    except ValueError as exc:
        return print_bad_input("report", exc)
    if parsed.args.evals:
        # lazy: keeps torch and httpx out of every verb's --help (evaluation.table imports them)
        from arena.evaluation.table import report_main as evals_main

        return evals_main(parsed)
    # lazy: keeps pandas, scipy and torch out of every verb's --help (arena.analysis imports them)
    from arena.analysis.report import main as report_main

    return report_main(list(args))


def _findings(args: Sequence[str]) -> int:
    """`arena findings [results_dir=DIR | csv=PATH] [out=DIR]`: the paper's findings tested on a results
    dir's sweeps or on committed run tables (arena/analysis/findings.py)."""
    # lazy: keeps pandas, scipy and torch out of every verb's --help (arena.analysis imports them)
    from arena.analysis.findings import main as findings_main

    return findings_main(list(args))


def _verl_config(args: Sequence[str]) -> int:
    """`arena verl-config key=value ...`: print the generated verl config."""
    return verl_config_main(list(args))


def _eval(args: Sequence[str]) -> int:
    """`arena eval` (arena/evaluation/, docs/eval.md): the command line read as EvalArgs (its
    sections typed: `retry.max`), the keys it gave, and every other key as a run config key,
    handed to arena.evaluation.entry.eval_entry."""
    parsed = parse_nested_args(EvalArgs, args)
    own = nested_dataclass(EvalArgs, parsed.args)
    return evaluation_entry.eval_entry(Parsed(own, parsed.given, parse_overrides(parsed.overrides)))


def _serve(args: Sequence[str]) -> int:
    """`arena serve` (arena/evaluation/server.py, docs/eval.md): its keys only, handed over as the
    flat {dotted key: value} dict of the keys given."""
    # lazy: keeps pydantic out of every verb's --help (evaluation.server imports it)
    from arena.evaluation.server import serve_main

    return serve_main(parse_nested_args(ServeArgs, args, own_only=True).args)


def _sweeps(verb: str) -> Callable[[Sequence[str]], int]:
    def run(args: Sequence[str]) -> int:
        return getattr(sweep_cli, f"{verb}_main")(list(args))

    run.__doc__ = f"`arena {verb} ...` (arena/sweeps/cli.py)"
    return run


VERBS: dict[str, Callable[[Sequence[str]], int]] = {
    "sweep": _sweeps("sweep"),
    "status": _sweeps("status"),
    "search": _sweeps("search"),
    "report": _report,
    "findings": _findings,
    "verl-config": _verl_config,
    "methods": _methods,
    "envs": _envs,
    "train": _train,
    "bc": _bc,
    "eval": _eval,
    "serve": _serve,
}
assert set(VERBS) == set(VERB_HELP), "every verb has its --help (arena/cli_help.py VERB_HELP)"


def _print_help(text: str) -> None:
    """Print help text; a reader that closes the pipe early (`arena help train | head`) ends it
    quietly, without a BrokenPipeError traceback."""
    import os

    try:
        print(text, flush=True)
    except BrokenPipeError:
        # the interpreter flushes stdout again at exit: point it at /dev/null (Python's docs, signal)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _version() -> str:
    from importlib import metadata

    try:
        return f"arena {metadata.version('arena')}"
    except metadata.PackageNotFoundError:
        return "arena (not installed: run from a checkout)"


def _api_key_envs(args: Sequence[str]) -> tuple[str, ...]:
    """The variable an eval's `api_key_env=` names (its value is a key: never warned about), by
    the one grammar; none when the command line does not parse (the verb then says why)."""
    try:
        name = last_value(args, "api_key_env")
    except BadArgument:
        return ()
    return (str(name),) if name else ()


def main(argv: Sequence[str] | None = None) -> int:
    tolerate_closed_pipe()  # `arena methods | head -1`: no BrokenPipeError traceback (arena/cli_output.py)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        sys.stdout.flush()  # here, where a closed pipe is tolerated, not in the interpreter's exit


def _main(argv: list[str]) -> int:
    if argv[:1] == ["help"] and argv[1:2]:  # `arena help train` = `arena train --help`
        argv = [argv[1], "--help"]
    if argv[:1] == ["--version"]:
        _print_help(_version())
        return EXIT_OK
    if not argv or argv[0] in (*HELP_FLAGS, "help"):
        _print_help(overview())
        return EXIT_OK if argv else EXIT_BAD_INPUT
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        near = close_matches(verb, VERBS)
        return print_bad_input("", f"unknown verb {verb!r}; {f'did you mean {near[0]}? ' if near else ''}"
                               f"valid: {', '.join(VERBS)}")
    if any(arg in HELP_FLAGS for arg in rest):
        _print_help(help_text(verb, [a for a in rest if a not in HELP_FLAGS]))
        return EXIT_OK

    try:  # every ARENA_* variable, before anything runs (arena/env_vars.py)
        check_environment(ignore=_api_key_envs(rest))
    except BadEnvironment as exc:
        return print_bad_input(verb, exc)
    malloc_tuning.tune_malloc()  # keep freed memory instead of faulting it in again (arena/malloc_tuning.py)

    with remembered_command(argv):  # what each run folder's command.txt records
        try:
            check_flags(verb, rest)
            return VERBS[verb](rest)
        except (BadInput, BadArgument) as exc:
            return print_bad_input(verb, exc)
        except OSError as exc:  # a results_dir / out this user cannot write (read-only, not permitted), or a full disk
            if out_of_space(exc):
                print(f"arena {verb}: {out_of_space_message(exc)}", file=sys.stderr)
                return EXIT_FAILED
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            return print_bad_input(verb, f"cannot write {exc.filename}: {exc.strerror}; valid: a results_dir= "
                                         "(or out=) this user can write")


if __name__ == "__main__":
    sys.exit(main())
