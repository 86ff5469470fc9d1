"""Entry points for `arena sweep`, `arena status` and `arena search` (wired in arena/cli.py).

Exit codes (arena.cli_errors; docs/design.md, CLI grammar and exit codes): 0 success; 2 bad
input, with the valid choices listed, and nothing launched; 1 when one or more cells failed.
"""
from __future__ import annotations

import sys

from typing import Callable, Optional

from arena.cli_errors import EXIT_FAILED, EXIT_OK, out_of_space, out_of_space_message, print_bad_input
from arena.config.launchers import launcher_config
from arena.config.verb_args import SearchArgs, StatusArgs, SweepArgs
from arena.config.verb_grammar import Parsed, parse_args, parse_overrides, parse_own_args
from arena.runs.layout import ERROR_FILE, check_name

from .driver_lock import SweepBusy
from .dry_run import print_plan
from .run_overrides import launcher_missing
from .status import print_summary, status_lines

_bad = print_bad_input


def _finish(plan, outcome: dict[str, str], log: Callable) -> int:
    failed = sorted(cid for cid, state in outcome.items() if state != "done")
    print_summary(plan.results.root, plan.name, log=log)
    if plan.auto is not None:
        # lazy: keeps numpy out of this module's import
        from .auto_sweep import summary_lines

        for line in summary_lines(plan):
            log(line)
    if failed:
        log(f"[sweep] {len(failed)} cell(s) not done: " + ", ".join(
            f"{cid} ({outcome[cid]}; see {plan.results.cell(plan.name, cid) / ERROR_FILE})" for cid in failed))
        return EXIT_FAILED
    log(f"[sweep] all {len(outcome)} cells done: {plan.sweep_dir}")
    return EXIT_OK


def sweep_main(args: list[str] | Parsed, *, train_fn: Optional[Callable] = None,
               bc_fn: Optional[Callable] = None, log: Callable = print, arms: Optional[list] = None) -> int:
    """`arena sweep dimension=NAME [env=...] [seeds=N|[...]|auto [max_seeds=N] [min_effect=P]] [launcher=...]
    [fail_fast=true] [dry_run=true] key=value...` (the keys: arena.config.verb_args.SweepArgs;
    `--dry-run` is dry_run=true: print the plan, write and launch nothing)."""
    # lazy: keeps numpy out of this module's import
    from .sweep import build_plan, execute

    try:
        plan, options = build_plan(args, arms=arms)
    except ValueError as exc:
        return _bad("sweep", exc)
    if plan.superseded:
        # lazy: keeps numpy out of this module's import
        from .sweep import superseded_note

        log(superseded_note(plan, plan.superseded))
    if options.dry_run:
        print_plan(plan, options, log=log)
        return EXIT_OK
    missing = launcher_missing(launcher_config(options.launcher)["kind"])
    if missing:  # before the manifest is written
        return _bad("sweep", missing)
    if plan.auto is None:
        log(f"[sweep] {plan.name}: {len(plan.cells)} cells ({len(plan.arms)} arms x {len(plan.envs)} envs x "
            f"{len(plan.seeds)} seeds) -> {plan.sweep_dir}")
    else:
        log(f"[sweep] {plan.name}: seeds=auto, {len(plan.cells)} cells so far ({len(plan.arms)} arms x "
            f"{len(plan.envs)} envs, {plan.auto.first} seeds first, then one per round to the unresolved arms, "
            f"at most {plan.auto.max_seeds}: {len(plan.worst_case)} cells) -> {plan.sweep_dir}")
    try:
        outcome = execute(plan, options, train_fn=train_fn, bc_fn=bc_fn, log=log)
    except SweepBusy as exc:
        return _bad("sweep", exc)
    except OSError as exc:  # a full disk while copying a finished twin or writing the sweep's files
        if not out_of_space(exc):
            raise
        print(f"arena sweep: {out_of_space_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return _finish(plan, outcome, log)


def search_main(args: list[str], *, train_fn: Optional[Callable] = None, bc_fn: Optional[Callable] = None,
                log: Callable = print) -> int:
    """`arena search method=NAME [env=...] [search.mode=first|best|tpe] [search.seeds=[...]] key=value...`:
    a one-arm sweep named `search-<method>-<budget>` with the stability search on (the keys:
    arena.config.verb_args.SearchArgs)."""
    import dataclasses

    # lazy: keeps torch out of this module's import
    from arena.po.methods import METHODS

    try:
        parsed = parse_args(SearchArgs, args)
        refused = [o.key_or_group for o in parse_overrides(parsed.overrides) if o.key_or_group in ("dimension", "grid")]
    except ValueError as exc:
        return _bad("search", exc)
    search = parsed.args
    method = next((name for name in METHODS if search.method and name.lower() == str(search.method).lower()),
                  search.method)  # SAPO_SM
    if method not in METHODS:
        return _bad("search", ValueError(f"method={method!r}: valid methods: {', '.join(METHODS)}"))
    if refused:
        return _bad("search", ValueError("takes method=NAME, not dimension= or grid="))
    # lazy: keeps numpy out of this module's import
    from .sweep import budget_of

    shared = {f.name: getattr(search, f.name) for f in dataclasses.fields(SweepArgs) if hasattr(search, f.name)}
    # the last budget= wins (arena.config.verb_grammar), as in Hydra and in the sweep's own name
    shared.update(dimension=f"search-{method}", name=search.name or f"search-{method}-{budget_of(parsed.overrides)}")
    sweep = Parsed(SweepArgs(**shared), parsed.given - {"method"} | {"dimension", "name"},
                   ["search.enabled=true", *parsed.overrides])
    return sweep_main(sweep, train_fn=train_fn, bc_fn=bc_fn, log=log, arms=[{"name": method, "po.method": method}])


def status_main(args: list[str], log: Callable = print) -> int:
    """`arena status name=NAME [results_dir=...]`: the sweep's state from disk alone (the keys:
    arena.config.verb_args.StatusArgs)."""
    try:
        parsed = parse_own_args(StatusArgs, args)  # status takes its own keys only
        if parsed.args.name is None:
            raise ValueError("needs name=SWEEP; valid keys: name, results_dir")
        check_name("name", parsed.args.name)  # a folder under results_dir/sweeps, never a path
        lines = status_lines(str(parsed.args.results_dir), parsed.args.name)
    except ValueError as exc:
        return _bad("status", exc)
    for line in lines:
        log(line)
    return EXIT_OK
