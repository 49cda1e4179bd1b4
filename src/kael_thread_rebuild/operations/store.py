"""The durable operation store: one JSON record per operation, one cross-process lock.

Layout under the state dir (0700): `operations/<id>.json` (0600), `backups/<id>/` (0700),
`coordinator.lock`. Every read-modify-write of a record happens under the lock; records are
replaced atomically, so a reader without the lock sees a whole old or a whole new record.
Callers never do slow work (hashing, switching, waiting) while holding the lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from filelock import FileLock
from pydantic import ValidationError

from ..errors import KaelError
from ..fsutil import atomic_write_json
from .model import (
    SETTLED,
    Operation,
    OperationNotFound,
    OperationStatus,
    Transition,
    check_operation_id,
    check_transition,
    utcnow,
)
from .statuses import record_files, statuses

DIR_MODE = 0o700
FILE_MODE = 0o600
TEMP_SUFFIX = ".tmp"  # fsutil's temporary files: `.<name>.<random>.tmp`
_RESERVED = frozenset({"operation_id", "status", "history", "created_at", "updated_at"})


def make_private_dir(path: Path) -> Path:
    """Create PATH (and missing parents) with the new directory itself 0700."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, DIR_MODE)
    return path


class StoreError(KaelError):
    """A record on disk cannot be read."""


class OperationStore:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = make_private_dir(state_dir)
        self.operations_dir = make_private_dir(state_dir / "operations")
        self.backups_dir = make_private_dir(state_dir / "backups")
        self.lock_path = state_dir / "coordinator.lock"
        self._lock = FileLock(self.lock_path, mode=FILE_MODE)

    # -- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the coordinator lock (re-entrant within this store object)."""
        with self._lock:
            yield

    # -- reading (safe without the lock: records are replaced atomically) --------------------

    def record_path(self, operation_id: str) -> Path:
        return self.operations_dir / f"{check_operation_id(operation_id)}.json"

    def backup_dir(self, operation_id: str) -> Path:
        """The operation's backup dir, created 0700 on first use."""
        return make_private_dir(self.backups_dir / check_operation_id(operation_id))

    def load(self, operation_id: str) -> Operation:
        path = self.record_path(operation_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise OperationNotFound(f"no operation {operation_id!r}") from None
        try:
            return Operation.model_validate(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise StoreError(f"operation record {path.name} is unreadable: {first}") from None

    def list_operations(self) -> list[Operation]:
        """Every operation, oldest first."""
        ops = [self.load(path.stem) for path in self._record_files()]
        return sorted(ops, key=lambda op: (op.created_at, op.operation_id))

    def unsettled(self) -> list[Operation]:
        """Operations with something in flight (not activated, cancelled, failed, rolled_back).

        Reads only the `status` of each record first, so that the Stop hook stays fast with a
        long history.
        """
        found = [self.load(path.stem) for path, status in statuses(self.operations_dir)
                 if status not in SETTLED]  # an unreadable record: load() reports it
        return sorted(found, key=lambda op: (op.created_at, op.operation_id))

    def active(self) -> Operation | None:
        """The one operation in flight, if any (the service keeps it to at most one)."""
        unsettled = self.unsettled()
        return unsettled[-1] if unsettled else None

    def latest(self) -> Operation | None:
        ops = self.list_operations()
        return ops[-1] if ops else None

    def _record_files(self) -> list[Path]:
        return record_files(self.operations_dir)

    # -- writing (always under the lock) -------------------------------------------------------

    def create(self, op: Operation) -> Operation:
        with self._lock:
            path = self.record_path(op.operation_id)
            atomic_write_json(path, op.model_dump(mode="json"), FILE_MODE, overwrite=False)
        return op

    def transition(self, operation_id: str, to: OperationStatus, note: str = "",
                   **changes: Any) -> Operation:
        """Move the operation to TO (refused by name when illegal), applying CHANGES with it."""
        with self._lock:
            op = self.load(operation_id)
            check_transition(operation_id, op.status, to)
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
            for directory in [self.operations_dir, *self._backup_dirs()]:
                for path in directory.glob(f".*{TEMP_SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed.append(path)
        return removed

    def _backup_dirs(self) -> list[Path]:
        return [p for p in self.backups_dir.iterdir() if p.is_dir()]
