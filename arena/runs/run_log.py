"""What made a run folder, kept in it (docs/design.md, Run folder):

    <out>/command.txt   one line per start: `<UTC time>  cd <cwd> && <command>`, appended, so a
                        resumed run lists every command that worked on it (a start that
                        finds the run done, `arena train` or `arena eval`, records nothing)
    <out>/run.log       everything the run printed (stdout and stderr), appended; a sweep's
                        verl cell, which trains in a child process, copies its own output there

`arena train` and every sweep cell go through `recording`. The command is the one `arena` was
given (cli.main stores it in $ARENA_COMMAND; a sweep's driver passes it on to its jobs, so a
cell names the sweep command that made it).
"""
from __future__ import annotations

import io
import os
import shlex
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence, TextIO

from .layout import COMMAND_FILE, RUN_LOG_FILE

COMMAND_ENV = "ARENA_COMMAND"


@contextmanager
def remembered_command(argv: Sequence[str]) -> Iterator[None]:
    """`arena <argv>` as this process's command (and its jobs') while the block runs; the
    environment is restored after it, so a caller that runs `main` twice in one process (the
    tests) never sees the first command as a hand-off from its shell (arena/env_vars.py)."""
    before = os.environ.get(COMMAND_ENV)
    os.environ[COMMAND_ENV] = shlex.join(["arena", *argv])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(COMMAND_ENV, None)
        else:
            os.environ[COMMAND_ENV] = before


def current_command() -> str:
    return os.environ.get(COMMAND_ENV) or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])


class _Tee(io.TextIOBase):
    """A text stream that writes to `stream` and to the run log."""

    def __init__(self, stream: TextIO, log: TextIO):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.log.write(text)
        self.log.flush()  # a killed run keeps what it printed
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def errors(self):  # type: ignore[override]
        return getattr(self.stream, "errors", None)

    def __getattr__(self, name: str):  # e.g. `buffer`: the stream's own (what is written there is not logged)
        return getattr(self.stream, name)


@contextmanager
def recording(folder: str | Path, command: str | None = None) -> Iterator[Path]:
    """Append the command to `<folder>/command.txt`, and copy what this process prints to
    `<folder>/run.log` while the block runs (output of child processes is not copied)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(folder / COMMAND_FILE, "a") as fh:
        fh.write(f"{stamp}  cd {shlex.quote(os.getcwd())} && {command or current_command()}\n")
    with copied_to_run_log(folder, header=f"--- {stamp}: {command or current_command()}\n"):
        yield folder


@contextmanager
def copied_to_run_log(folder: str | Path, header: str = "") -> Iterator[None]:
    """Copy what this process prints (sys.stdout and sys.stderr) to `<folder>/run.log`, appended,
    while the block runs. A sweep's verl cell runs in a child process, whose output the job's
    `recording` does not see: the child copies its own (arena/backends/verl/main.py)."""
    out, err = sys.stdout, sys.stderr
    with open(Path(folder) / RUN_LOG_FILE, "a") as log:
        log.write(header)
        log.flush()  # before anything a child process appends
        sys.stdout, sys.stderr = _Tee(out, log), _Tee(err, log)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = out, err
