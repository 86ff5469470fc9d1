"""`arena eval`: one policy (arena.evaluation.runner) or every finished cell of a sweep
(arena.evaluation.sweep_eval, which calls the runner per cell). The choice lives here so that
neither module imports the other both ways."""
from __future__ import annotations

from typing import Callable

from arena.config.verb_args import EvalArgs
from arena.config.verb_grammar import Parsed

from .sweep_eval import sweep_eval_main


def eval_entry(parsed: Parsed[EvalArgs], log: Callable = print) -> int:
    """sweep=NAME evaluates a sweep's cells; anything else evaluates one policy. `parsed`: the
    command line as EvalArgs, the keys it gave, and the run config keys ({dotted key: value})."""
    if parsed.args.sweep is not None:
        return sweep_eval_main(parsed, log)
    # lazy: keeps httpx, numpy, tenacity, torch out of this module's import
    from .runner import eval_main

    return eval_main(parsed, log)
