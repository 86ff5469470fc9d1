"""The exit codes and the one error format of every `arena` verb (docs/design.md, CLI grammar
and exit codes): 0 success; 1 one or more runs failed (their error.txt says why); 2 bad input,
printed as `arena <verb>: <message>` with the valid choices, no traceback, nothing written."""
from __future__ import annotations

import sys

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(ValueError):
    """A user error: printed without a traceback, exit code 2."""


def print_bad_input(verb: str, error: Exception | str) -> int:
    """Print `arena <verb>: <message>` to stderr; returns EXIT_BAD_INPUT."""
    print(f"arena{' ' + verb if verb else ''}: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT
