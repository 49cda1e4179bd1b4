"""The durable operation store: one JSON record per operation, one cross-process lock.

Layout under the state dir (0700): `operations/<id>.json` (0600), `backups/<id>/` (0700),
`candidates/<id>/` (0700, the candidate of an operation that failed before it was used),
`coordinator.lock`. Every read-modify-write of a record happens under the lock; records are
replaced atomically, so a reader without the lock sees a whole old or a whole new record.
Callers never do slow work (hashing, switching, waiting) while holding the lock.

Trust: the state dir (and each of its folders) must belong to the user the engine runs as and be
closed to group and other (0700), or the store refuses to open; a record is read only from a
regular file of that user named `<operation id>.json`, and its ids must have their shapes. Any
other file in `operations/` is skipped and reported (`StrayFile`), never read as an operation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import KaelError, Refused
from ..fsutil import atomic_write_json
from ..state_layout import OPERATIONS, StateLayout, drain_note
from .files import confined
from .model import (
    SETTLED,
    Operation,
    OperationNotFound,
    OperationStatus,
    Transition,
    require_operation_id,
    require_transition,
    utcnow,
)
from .statuses import entries, is_record_name, statuses

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Records hold ids, digests, counts and a capped reason: far below this.
MAX_RECORD_BYTES = 16 << 20
TEMP_SUFFIX = ".tmp"  # fsutil's temporary files: `.<name>.<random>.tmp`
_RESERVED = frozenset({"operation_id", "status", "history", "created_at", "updated_at"})


class UntrustedStateDir(Refused):
    """The state dir (or a folder in it) could be written by someone else than the engine."""


def trust_problem(path: Path) -> str:
    """Why the existing directory PATH cannot be trusted with the engine's state; empty when
    it can: a directory of the user the engine runs as, mode 0700."""
    info = path.stat()
    uid = os.geteuid()
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != uid:
        return (f"{path} belongs to uid {info.st_uid}, not to uid {uid} that runs the engine "
                f"(chown it to {uid})")
    mode = stat.S_IMODE(info.st_mode)
    if mode != DIR_MODE:
        return f"{path} has mode {mode:04o}, not {DIR_MODE:04o} (chmod 700 it)"
    return ""


def make_private_dir(path: Path) -> Path:
    """Create PATH (and missing parents) with the new directory itself 0700; refuse an existing
    one that is not the engine user's own 0700 directory."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, DIR_MODE)
    problem = trust_problem(path)
    if problem:
        raise UntrustedStateDir(f"state dir not trusted: {problem}")
    return path


class Draining(Refused):
    """The installer is replacing the daemon: no new operation begins until it is done."""


class StoreError(KaelError):
    """A record on disk cannot be read."""


class StrayFile(BaseModel):
    """A file in `operations/` that is not an operation record: skipped, and reported."""

    model_config = ConfigDict(frozen=True)

    name: str
    problem: str

    def line(self) -> str:
        return f"skipped {OPERATIONS}/{self.name}: {self.problem}"


@dataclass
class Scan:
    """What a look at `operations/` found: operations (oldest first) and the files that are not
    records."""

    operations: list[Operation] = field(default_factory=list)
    strays: list[StrayFile] = field(default_factory=list)


class OperationStore:
    def __init__(self, state_dir: Path) -> None:
        layout = StateLayout(state_dir)
        self.state_dir = make_private_dir(state_dir)
        self.operations_dir = make_private_dir(layout.operations)
        self.backups_dir = make_private_dir(layout.backups)
        self.candidates_dir = layout.candidates  # created on first use
        if self.candidates_dir.exists():
            make_private_dir(self.candidates_dir)
        self.lock_path = layout.coordinator_lock
        from filelock import FileLock  # here: `dirty` and `plan` import this module's models only

        self._lock = FileLock(self.lock_path, mode=FILE_MODE)

    # -- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the coordinator lock (re-entrant within this store object)."""
        with self._lock:
            yield

    # -- reading (safe without the lock: records are replaced atomically) --------------------

    def record_path(self, operation_id: str) -> Path:
        return confined(self.operations_dir, f"{require_operation_id(operation_id)}.json")

    def backup_dir(self, operation_id: str) -> Path:
        """The operation's backup dir, created 0700 on first use."""
        return make_private_dir(confined(self.backups_dir, require_operation_id(operation_id)))

    def candidate_dir(self, operation_id: str) -> Path:
        """Where a failed operation's candidate is kept, out of Claude Code's `/resume` list;
        created 0700 on first use."""
        make_private_dir(self.candidates_dir)
        return make_private_dir(confined(self.candidates_dir, require_operation_id(operation_id)))

    def load(self, operation_id: str) -> Operation:
        path = self.record_path(operation_id)
        try:
            raw = _read_own_file(path)
        except FileNotFoundError:
            raise OperationNotFound(f"no operation {operation_id!r}") from None
        except OSError as exc:
            raise StoreError(f"operation record {path.name} is unreadable: "
                             f"{exc.strerror or exc}") from None
        if not raw:
            raise StoreError(f"operation record {path.name} is unreadable: empty (0 bytes)")
        try:
            op = Operation.model_validate(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            first = _first_problem(exc)
            raise StoreError(f"operation record {path.name} is unreadable: {first}") from None
        if op.operation_id != operation_id:
            raise StoreError(f"operation record {path.name} holds operation "
                             f"{op.operation_id}, not {operation_id}")
        return op

    def scan(self, unsettled_only: bool = False) -> Scan:
        """Every operation (with UNSETTLED_ONLY: those not activated, cancelled, failed or
        rolled_back), oldest first, and every file in `operations/` that is not a record.

        UNSETTLED_ONLY reads only the `status` of settled records, so that the Stop hook stays
        fast with a long history.
        """
        found = Scan()
        known = {path: status for path, status in statuses(self.operations_dir)}
        for path in sorted(entries(self.operations_dir)):
            if not is_record_name(path.name):
                found.strays.append(StrayFile(name=path.name,
                                              problem="not named <operation id>.json"))
                continue
            if unsettled_only and known.get(path) in SETTLED:
                continue
            try:
                op = self.load(path.stem)
            except (StoreError, OperationNotFound) as exc:
                found.strays.append(StrayFile(name=path.name, problem=_after_colon(str(exc))))
                continue
            if not unsettled_only or op.status not in SETTLED:
                found.operations.append(op)
        found.operations.sort(key=lambda op: (op.created_at, op.operation_id))
        return found

    def list_operations(self) -> list[Operation]:
        """Every operation, oldest first (files that are not records are skipped: `scan`)."""
        return self.scan().operations

    def unsettled(self) -> list[Operation]:
        """Operations with something in flight (not activated, cancelled, failed, rolled_back)."""
        return self.scan(unsettled_only=True).operations

    def active(self) -> Operation | None:
        """The one operation in flight, if any (the service keeps it to at most one)."""
        unsettled = self.unsettled()
        return unsettled[-1] if unsettled else None

    def latest(self) -> Operation | None:
        ops = self.list_operations()
        return ops[-1] if ops else None

    # -- writing (always under the lock) -------------------------------------------------------

    def refuse_while_draining(self) -> None:
        """Refuse to begin an operation while the installer drains the instance (the operations
        already in flight go on: it waits for them)."""
        note = drain_note(self.state_dir)
        if note is not None:
            raise Draining(f"the installer is replacing this instance's daemon ({note}); "
                           "nothing was recorded: ask again in a few minutes")

    def create(self, op: Operation) -> Operation:
        with self._lock:
            self.refuse_while_draining()
            path = self.record_path(op.operation_id)
            atomic_write_json(path, op.model_dump(mode="json"), FILE_MODE, overwrite=False)
        return op

    def transition(self, operation_id: str, to: OperationStatus, note: str = "",
                   **changes: Any) -> Operation:
        """Move the operation to TO (refused by name when illegal), applying CHANGES with it."""
        with self._lock:
            op = self.load(operation_id)
            require_transition(operation_id, op.status, to)
            if op.status is OperationStatus.activated:  # a rollback begins
                self.refuse_while_draining()
            now = utcnow()
            step = Transition(from_status=op.status, to_status=to, at=now, note=note)
            return self._write(op, changes, status=to, updated_at=now,
                               history=[*op.history, step])

    def update(self, operation_id: str, **changes: Any) -> Operation:
        """Record facts on the operation without changing its state."""
        with self._lock:
            op = self.load(operation_id)
            return self._write(op, changes, updated_at=utcnow())

    def _write(self, op: Operation, changes: dict[str, Any], **system: Any) -> Operation:
        reserved = _RESERVED & changes.keys()
        if reserved:
            raise ValueError(f"fields {sorted(reserved)} are managed by the store")
        data = op.model_dump()
        data.update(changes)
        data.update(system)
        new = Operation.model_validate(data)
        atomic_write_json(self.record_path(new.operation_id), new.model_dump(mode="json"),
                          FILE_MODE)
        return new

    # -- housekeeping --------------------------------------------------------------------------

    def sweep_temp_files(self) -> list[Path]:
        """Remove temporary files a killed writer left in the state dir; returns them.

        Record writers hold the lock, so none is in progress while we hold it. Backup copies are
        written without the lock: call this only when no worker runs (recovery).
        """
        removed = []
        with self._lock:
            for directory in [self.operations_dir, *self._operation_dirs()]:
                for path in directory.glob(f".*{TEMP_SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed.append(path)
        return removed

    def _operation_dirs(self) -> list[Path]:
        """Each operation's backup dir and candidates dir (a copy across file systems leaves a
        temporary file there when killed)."""
        parents = [d for d in (self.backups_dir, self.candidates_dir) if d.is_dir()]
        return [p for parent in parents for p in parent.iterdir() if p.is_dir()]


def _read_own_file(path: Path) -> bytes:
    """PATH's bytes, read only when it is a regular file of the engine's user (never through a
    symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError("a symbolic link, not a record") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")
        if info.st_uid != os.geteuid():
            raise OSError(f"belongs to uid {info.st_uid}, not to uid {os.geteuid()}")
        if info.st_size > MAX_RECORD_BYTES:
            raise OSError(f"{info.st_size} bytes, more than a record ever holds")
        return handle.read(MAX_RECORD_BYTES + 1)


def _first_problem(exc: orjson.JSONDecodeError | ValidationError) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "(the record)"
        return f"{where}: {str(err['msg']).removeprefix('Value error, ')}"
    return "not JSON"


def _after_colon(message: str) -> str:
    """A StoreError's reason without the 'operation record <name> is unreadable' lead."""
    return message.partition(" is unreadable: ")[2] or message


class Recovery(BaseModel):
    """What the `recover` command did: the operations it settled, the files it skipped."""

    settled: list[Operation]
    skipped: list[StrayFile]
