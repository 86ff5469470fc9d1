"""Standard output of the `arena` command when it is a pipe whose reader has gone
(`arena methods | head -1`): the rest of the output is dropped instead of ending in a
BrokenPipeError traceback, and the verb finishes its work (a sweep piped into `head` still
runs its cells)."""
from __future__ import annotations

import os
import stat
import sys
from typing import Any


class ClosedPipeTolerant:
    """Wraps a text stream on a pipe: after the first BrokenPipeError, its file descriptor points
    at /dev/null (so neither later writes nor the interpreter's last flush fail)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tolerate_closed_pipe() -> None:
    """Wrap sys.stdout when it is a pipe (not a terminal, a file, or a test's capture)."""
    try:
        is_pipe = stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # no real file descriptor (a capture)
        return
    if is_pipe and not isinstance(sys.stdout, ClosedPipeTolerant):
        sys.stdout = ClosedPipeTolerant(sys.stdout)
