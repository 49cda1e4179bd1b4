"""The binding table `<project>/.agent/advisor-tasks.json`: which Kimi session each Claude Code
conversation talks to, keyed by the conversation: the session id its rebuild lineage started from
(`windows.Window.conversation`), so a switch to a rebuilt session and a rollback both reach the
same binding.

Every change takes the table's file lock, reads the table again from disk, changes it and
writes it atomically, so several servers (two windows on one project) never lose each other's
records. A closed binding replaced by a new one is archived, never overwritten. A table that is
not JSON or of another version is refused in one line and left as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TypeVar

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from kael_thread_rebuild.errors import StorageError
from kael_thread_rebuild.fsutil import atomic_write_bytes

from .errors import TableError
from .places import table_path

TABLE_VERSION: Literal[1] = 1
LOCK_SECONDS = 30.0
T = TypeVar("T")


class Binding(BaseModel):
    """One Claude Code conversation's advisor task. CLAUDE_SESSION: the conversation's key (the
    session its rebuild lineage started from)."""

    claude_session: str
    name: str
    goal: str = ""
    status: Literal["open", "closed"] = "open"
    kimi_session: str | None = None
    created_at: float = Field(default_factory=time.time)
    last_used: float | None = None
    closed_at: float | None = None
    consultations: list[str] = Field(default_factory=list)
    cost: float | None = None


class Table(BaseModel):
    version: Literal[1] = TABLE_VERSION
    bindings: dict[str, Binding] = Field(default_factory=dict)
    archived: list[Binding] = Field(default_factory=list)

    def find(self, task: str) -> tuple[str, Binding]:
        """The open or closed (not archived) binding TASK names: its Claude session id, a
        unique prefix of it (8 characters at least), or its name."""
        if task in self.bindings:
            return task, self.bindings[task]
        named = [(key, b) for key, b in self.bindings.items() if b.name == task]
        if len(task) >= 8 and not named:
            named = [(key, b) for key, b in self.bindings.items() if key.startswith(task)]
        if len(named) != 1:
            how = "several tasks match" if named else "no task"
            raise TableError(f"{how} {task!r} in this project (see advisor_list_tasks)")
        return named[0]

    def retire(self, key: str) -> None:
        """Archive KEY's binding (it is closed), freeing the conversation for a new one."""
        old = self.bindings.pop(key)
        if old.status == "open":
            old.status, old.closed_at = "closed", time.time()
        self.archived.append(old)


class BindingTable:
    def __init__(self, project: Path) -> None:
        self.path = table_path(project)
        self._lock = FileLock(str(self.path.with_name(f".{self.path.name}.lock")))

    def read(self) -> Table:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Table()
        except OSError as exc:
            raise TableError(f"the binding table {self.path} cannot be read: "
                             f"{exc.strerror or exc}") from None
        try:
            return Table.model_validate_json(raw)
        except ValidationError as exc:
            raise TableError(_refusal(self.path, exc)) from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock.acquire(timeout=LOCK_SECONDS):
                yield
        except Timeout:
            raise TableError(f"the binding table {self.path} stayed locked for "
                             f"{LOCK_SECONDS:.0f} s") from None
        except StorageError as exc:
            raise TableError(str(exc)) from None
        except OSError as exc:
            raise TableError(f"the binding table {self.path} cannot be written: "
                             f"{exc.strerror or exc}") from None

    def change(self, edit: Callable[[Table], T]) -> T:
        """Run EDIT on the table as it is on disk, under the lock, and write what it made."""
        with self._locked():
            table = self.read()
            result = edit(table)
            atomic_write_bytes(self.path, table.model_dump_json(indent=2).encode() + b"\n",
                               mode=0o644)
            return result


def _refusal(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return f"the binding table {path} is not JSON; it was left as it is"
    where = ".".join(str(part) for part in first["loc"])
    if where == "version":
        return (f"the binding table {path} is of another version ({first['input']!r}, this "
                f"server reads {TABLE_VERSION}); it was left as it is")
    return f"the binding table {path} is invalid at {where or 'the top'}: {first['msg']}; " \
           "it was left as it is"
