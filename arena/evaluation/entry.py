"""`arena eval`: one policy (arena.evaluation.runner) or every finished cell of a sweep
(arena.evaluation.sweep_eval, which calls the runner per cell). The choice lives here so that
neither module imports the other both ways."""
from __future__ import annotations

from typing import Callable


def eval_entry(args: dict, log: Callable = print) -> int:
    """sweep=NAME evaluates a sweep's cells; anything else evaluates one policy."""
    if args.get("sweep") is not None:
        from .sweep_eval import sweep_eval_main

        return sweep_eval_main(args, log)
    from .runner import eval_main

    return eval_main(args, log)
