"""Errors that reach a user: each carries a one-line message and the exit code it maps to.

A message is one line whatever it names: a path or a word with a line break or another control
character in it (`/x/pr\\noj`) is shown with that character escaped, here, for every message.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

# What ends or rewrites a line on a terminal, or in `str.splitlines`: C0 and C1 controls, and the
# Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """TEXT with each control character written as its escape (`\\n`, `\\x1b`)."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class KaelError(Exception):
    """Base class: `str(exc)` is the one line shown to the user."""

    exit_code = 1

    def __str__(self) -> str:
        return one_line(super().__str__())

    def lines(self) -> list[str]:
        """What the user is shown, one line each."""
        return [str(self)]

    def report(self, prog: str, file: TextIO | None = None) -> None:
        """Print the lines on stderr (or FILE), each after PROG."""
        for line in self.lines():
            print(f"{prog}: {line}", file=file or sys.stderr, flush=True)


class ConfigError(KaelError):
    """The config file is missing or invalid: one problem per line, exit 2 (`str` joins them
    with "; ")."""

    exit_code = 2

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("; ".join(self.lines()))

    def lines(self) -> list[str]:
        return [one_line(f"{self.source}: {problem}") for problem in self.problems]


class UsageError(KaelError):
    """The command line names something unusable (exit 2)."""

    exit_code = 2


class InputError(KaelError):
    """The transcript given cannot be read or is not allowed (exit 1)."""


class Refused(KaelError):
    """The engine refuses to act, with the reason (exit 1)."""


class StorageError(KaelError, OSError):
    """A file could not be written or read (disk full, I/O error, permissions): the message
    names the path and what the system said (exit 1). Also an OSError, for callers that
    handle those."""

    def __init__(self, message: str, errno: int | None = None, strerror: str | None = None,
                 filename: object = None) -> None:
        super().__init__(message)
        # As an OSError would have them, for callers that word their own message.
        self.errno = errno
        self.strerror = strerror
        self.filename = filename

    def __str__(self) -> str:
        return one_line(str(self.args[0]))  # OSError's own would rebuild it from errno and filename

    @classmethod
    def writing(cls, path: object, exc: OSError) -> StorageError:
        return cls(f"cannot write {path}: {exc.strerror or exc}", exc.errno, exc.strerror, path)
