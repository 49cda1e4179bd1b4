"""Errors that reach a user: each carries a one-line message and the exit code it maps to."""

from __future__ import annotations


class KaelError(Exception):
    """Base class: `str(exc)` is the one line shown to the user."""

    exit_code = 1


class ConfigError(KaelError):
    """The config file is missing or invalid: one problem per line, exit 2."""

    exit_code = 2

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {problem}" for problem in problems))


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
        return str(self.args[0])  # OSError's own would rebuild it from errno and filename

    @classmethod
    def writing(cls, path: object, exc: OSError) -> StorageError:
        return cls(f"cannot write {path}: {exc.strerror or exc}", exc.errno, exc.strerror, path)
