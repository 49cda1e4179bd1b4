"""The project's consultations (#t1, #t2, …), one file each under
`<project>/.agent/advisor-consultations/`, so a poll after the server restarted still finds them.

A running consultation names the server that runs it (`owner`), which holds a lock on a file of
its own while it lives: a running record whose owner's lock is free was interrupted, and a poll
says so with what is known instead of "unknown task".
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import time
import uuid
from pathlib import Path
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, Field, ValidationError

from kael_thread_rebuild.fsutil import atomic_write_bytes

from .errors import AdvisorError
from .places import consultations_dir

_ID = re.compile(r"#?t([1-9][0-9]{0,8})")
OWNERS = ".owners"


class Consultation(BaseModel):
    id: str
    binding: str
    task_name: str
    mode: str | None = None
    message: str
    status: Literal["running", "done", "failed"] = "running"
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    owner: str
    kimi_session: str | None = None
    answer: str = ""
    tools: list[str] = Field(default_factory=list)
    retries: int = 0
    rebuilt: bool = False
    error: str | None = None

    @property
    def elapsed(self) -> float:
        return (self.finished_at or time.time()) - self.started_at


def parse_id(text: str) -> str:
    found = _ID.fullmatch(text.strip())
    if found is None:
        raise AdvisorError(f"{text!r} is not a consultation number (like t1 or #t1)")
    return f"t{found.group(1)}"


class Registry:
    """The consultations of one project, as one server sees them."""

    def __init__(self, project: Path) -> None:
        self.dir = consultations_dir(project)
        self.owner = uuid.uuid4().hex
        self._owner_fd: int | None = None

    def _path(self, consultation_id: str) -> Path:
        return self.dir / f"{consultation_id}.json"

    def _hold_owner_lock(self) -> None:
        if self._owner_fd is not None:
            return
        owners = self.dir / OWNERS
        owners.mkdir(parents=True, exist_ok=True)
        path = owners / f"{self.owner}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for the life of this process
        self._owner_fd = fd
        atexit.register(path.unlink, missing_ok=True)  # a killed server leaves it: still free

    def _owner_alive(self, owner: str) -> bool:
        if owner == self.owner:
            return True
        try:
            fd = os.open(self.dir / OWNERS / f"{owner}.lock", os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def start(self, binding: str, task_name: str, message: str,
              mode: str | None) -> Consultation:
        """A new running consultation with the next free number, recorded."""
        self._hold_owner_lock()
        with FileLock(str(self.dir / ".number.lock")):
            taken = [int(m.group(1)) for path in self.dir.glob("t*.json")
                     if (m := _ID.fullmatch(path.stem))]
            consultation = Consultation(id=f"t{max(taken, default=0) + 1}", binding=binding,
                                        task_name=task_name, mode=mode, message=message,
                                        owner=self.owner)
            self.save(consultation)
        return consultation

    def save(self, consultation: Consultation) -> None:
        atomic_write_bytes(self._path(consultation.id),
                           consultation.model_dump_json(indent=2).encode() + b"\n", mode=0o644)

    def load(self, consultation_id: str) -> Consultation:
        path = self._path(parse_id(consultation_id))
        try:
            return Consultation.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            raise AdvisorError(f"no consultation #{path.stem} in this project") from None
        except (OSError, ValidationError) as exc:
            raise AdvisorError(f"consultation #{path.stem} cannot be read ({path}): "
                               f"{type(exc).__name__}") from None

    def interrupted(self, consultation: Consultation) -> bool:
        """Whether CONSULTATION is recorded running but its server is gone."""
        return consultation.status == "running" and not self._owner_alive(consultation.owner)
