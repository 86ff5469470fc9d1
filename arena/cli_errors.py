"""The exit codes and the one error format of every `arena` verb (docs/design.md, CLI grammar
and exit codes): 0 success; 1 one or more runs failed (their error.txt says why); 2 bad input,
printed as `arena <verb>: <message>` with the valid choices, no traceback, nothing written."""
from __future__ import annotations

import errno
import sys

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(ValueError):
    """A user error: printed without a traceback, exit code 2."""


def print_bad_input(verb: str, error: Exception | str) -> int:
    """Print `arena <verb>: <message>` to stderr; returns EXIT_BAD_INPUT."""
    print(f"arena{' ' + verb if verb else ''}: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT


def out_of_space(error: BaseException) -> bool:
    """An OSError for a full disk or an exhausted quota (ENOSPC, EDQUOT)."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def out_of_space_message(error: OSError) -> str:
    """What to do about a full disk: the file, and that rerunning resumes (runs write atomically)."""
    where = f" writing {error.filename}" if error.filename else ""
    return (f"no space left on the device{where} ({error.strerror}): free space there, or pass "
            "results_dir= on another disk, and rerun the same command (finished runs are kept; a copy or "
            "checkpoint is written whole or not at all, and an unfinished run resumes)")
