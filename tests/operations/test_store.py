"""The store: private modes, atomic records, one cross-process lock."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from kael_thread_rebuild.operations.model import (
    Operation,
    OperationStatus,
    new_operation_id,
    utcnow,
)
from kael_thread_rebuild.operations.store import OperationStore, StoreError

S = OperationStatus


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _new(store: OperationStore, reason: str = "r") -> Operation:
    now = utcnow()
    return store.create(Operation(operation_id=new_operation_id(now), created_at=now,
                                  updated_at=now, reason=reason))


def test_modes(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = OperationStore(tmp_path / "deep" / "state")
        op = _new(store)
        backups = store.backup_dir(op.operation_id)
        with store.locked():
            pass
    finally:
        os.umask(old)
    assert _mode(store.state_dir) == 0o700
    assert _mode(store.operations_dir) == 0o700
    assert _mode(store.backups_dir) == 0o700
    assert _mode(backups) == 0o700
    assert _mode(store.record_path(op.operation_id)) == 0o600
    assert _mode(store.lock_path) == 0o600
    store.transition(op.operation_id, S.scheduled, "x")
    assert _mode(store.record_path(op.operation_id)) == 0o600


def test_records_round_trip_and_list(store: OperationStore) -> None:
    first, second = _new(store, "one"), _new(store, "two")
    assert [op.reason for op in store.list_operations()] == ["one", "two"]
    assert store.load(first.operation_id) == first
    store.transition(first.operation_id, S.cancelled, "x")
    assert store.active() == second
    assert store.latest() == second
    assert [op.operation_id for op in store.unsettled()] == [second.operation_id]


def test_create_never_overwrites(store: OperationStore) -> None:
    op = _new(store)
    with pytest.raises(FileExistsError):
        store.create(op)


def test_failed_write_keeps_the_old_record(store: OperationStore,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    op = _new(store)
    before = store.record_path(op.operation_id).read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.transition(op.operation_id, S.scheduled, "x")
    monkeypatch.undo()
    assert store.record_path(op.operation_id).read_bytes() == before
    assert list(store.operations_dir.glob(".*")) == []


def test_store_managed_fields_cannot_be_changed(store: OperationStore) -> None:
    op = _new(store)
    with pytest.raises(ValueError, match="managed by the store"):
        store.update(op.operation_id, status=S.activated)


def test_unreadable_record_is_named(store: OperationStore) -> None:
    op = _new(store)
    store.record_path(op.operation_id).write_text("{not json")
    with pytest.raises(StoreError, match=op.operation_id):
        store.load(op.operation_id)


def test_sweep_removes_temp_files(store: OperationStore) -> None:
    op = _new(store)
    junk = [store.operations_dir / f".{op.operation_id}.json.abc.tmp",
            store.backup_dir(op.operation_id) / ".x.jsonl.def.tmp",
            store.candidate_dir(op.operation_id) / ".y.jsonl.ghi.tmp"]
    for path in junk:
        path.write_text("half")
    assert sorted(store.sweep_temp_files()) == sorted(junk)
    assert not any(path.exists() for path in junk)
    assert store.record_path(op.operation_id).exists()


def _increment(state_dir: str, operation_id: str, times: int) -> None:
    store = OperationStore(Path(state_dir))
    for _ in range(times):
        with store.locked():
            op = store.load(operation_id)
            count = op.stats.get("n", 0)
            assert isinstance(count, int)
            store.update(operation_id, stats={"n": count + 1})


def test_lock_serializes_read_modify_write_across_processes(store: OperationStore) -> None:
    op = _new(store)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_increment, args=(str(store.state_dir), op.operation_id, 25))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert store.load(op.operation_id).stats["n"] == 100


def _try_lock(lock_path: str, result: multiprocessing.Queue[str]) -> None:
    try:
        with FileLock(lock_path, timeout=0.2):
            result.put("acquired")
    except Timeout:
        result.put("blocked")


def test_lock_excludes_other_processes(store: OperationStore) -> None:
    ctx = multiprocessing.get_context("spawn")
    result: multiprocessing.Queue[str] = ctx.Queue()
    with store.locked():
        child = ctx.Process(target=_try_lock, args=(str(store.lock_path), result))
        child.start()
        child.join(30)
    assert result.get(timeout=5) == "blocked"
    child = ctx.Process(target=_try_lock, args=(str(store.lock_path), result))
    child.start()
    child.join(30)
    assert result.get(timeout=5) == "acquired"
