"""The service: confirmation words, joining, refusals, the Stop hook's checks, wait."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import Refused, UsageError
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationNotFound, OperationStatus
from kael_thread_rebuild.operations.stop_input import StopHookInput
from kael_thread_rebuild.operations.store import OperationStore
from tests.builder import SESSION

from .harness import HarnessBase, scheduled, stop_input

S = OperationStatus
OTHER = "5e55a1d0-0000-4000-8000-000000000002"


@pytest.mark.parametrize("word", ["", "rebuild", "REBUILD ", "yes", "CANCEL"])
def test_request_needs_the_exact_word(config: Config, word: str) -> None:
    with pytest.raises(Refused, match="exactly REBUILD"):
        service.request(config, "r", word)
    assert service.history(config) == []


def test_request_needs_a_reason(config: Config) -> None:
    with pytest.raises(UsageError, match="reason"):
        service.request(config, "  ", "REBUILD")


def test_second_request_joins_pending_and_scheduled(config: Config, source: Path) -> None:
    first = service.request(config, "one", "REBUILD", requested_by="mcp")
    assert first.status is S.pending and first.requested_by == "mcp"
    assert service.request(config, "two", "REBUILD") == first
    service.record_stop(config, stop_input(config))
    joined = service.request(config, "three", "REBUILD")
    assert joined.operation_id == first.operation_id and joined.status is S.scheduled
    assert len(service.history(config)) == 1


IN_PROGRESS = [S.running, S.verifying, S.activating]


@pytest.mark.parametrize("status", IN_PROGRESS)
def test_request_refused_while_running(config: Config, source: Path, store: OperationStore,
                                       status: S) -> None:
    op = scheduled(config)
    for step in IN_PROGRESS[: IN_PROGRESS.index(status) + 1]:
        store.transition(op.operation_id, step, "test")
    with pytest.raises(Refused, match=f"{op.operation_id}.*{status.value}"):
        service.request(config, "again", "REBUILD")


def test_cancel(config: Config, source: Path) -> None:
    op = service.request(config, "r", "REBUILD")
    with pytest.raises(Refused, match="exactly CANCEL"):
        service.cancel(config, op.operation_id, "cancel")
    assert service.cancel(config, op.operation_id, "CANCEL").status is S.cancelled
    with pytest.raises(Refused, match="only an operation awaiting confirmation, pending or "
                                      "scheduled"):
        service.cancel(config, op.operation_id, "CANCEL")
    again = scheduled(config)
    assert service.cancel(config, again.operation_id, "CANCEL").status is S.cancelled
    # The Stop after a cancel finds nothing to do.
    assert service.record_stop(config, stop_input(config)) is None


def test_cancel_unknown_operation(config: Config) -> None:
    with pytest.raises(OperationNotFound):
        service.cancel(config, "20260101T000000Z-0000abcd", "CANCEL")
    with pytest.raises(OperationNotFound):
        service.status(config, "../../etc/passwd")


def _activated(config: Config, store: OperationStore, source: Path) -> str:
    op = scheduled(config)
    for step in IN_PROGRESS:
        store.transition(op.operation_id, step, "test")
    store.transition(op.operation_id, S.activated, "test", new_session_id=OTHER)
    return op.operation_id


def test_rollback_request(config: Config, store: OperationStore, source: Path) -> None:
    pending = service.request(config, "r", "REBUILD")
    with pytest.raises(Refused, match="only an activated"):
        service.rollback_request(config, pending.operation_id, "ROLLBACK")
    service.cancel(config, pending.operation_id, "CANCEL")
    op_id = _activated(config, store, source)
    with pytest.raises(Refused, match="exactly ROLLBACK"):
        service.rollback_request(config, op_id, "REBUILD")
    other = service.request(config, "later", "REBUILD")
    with pytest.raises(Refused, match=f"{other.operation_id} is pending"):
        service.rollback_request(config, op_id, "ROLLBACK")
    service.cancel(config, other.operation_id, "CANCEL")
    op = service.rollback_request(config, op_id, "ROLLBACK")
    assert op.status is S.rollback_pending
    with pytest.raises(Refused, match="rollback"):
        service.request(config, "meanwhile", "REBUILD")


def test_rollback_only_of_the_latest_switch(config: Config, store: OperationStore,
                                            source: Path) -> None:
    first = _activated(config, store, source)
    _activated(config, store, source)
    with pytest.raises(Refused, match="only the latest switch"):
        service.rollback_request(config, first, "ROLLBACK")


def test_status_and_history(config: Config, source: Path) -> None:
    assert service.status(config) is None
    op = service.request(config, "r", "REBUILD")
    assert service.status(config) == op
    assert service.status(config, op.operation_id) == op
    service.cancel(config, op.operation_id, "CANCEL")
    latest = service.status(config)
    assert latest is not None and latest.status is S.cancelled
    assert [o.operation_id for o in service.history(config)] == [op.operation_id]


# -- the Stop hook ---------------------------------------------------------------------------


def test_stop_without_waiting_operation_does_nothing(config: Config, source: Path) -> None:
    assert service.record_stop(config, stop_input(config)) is None
    assert service.history(config) == []


def test_stop_schedules_with_the_hook_facts(config: Config, source: Path,
                                            base: HarnessBase) -> None:
    service.request(config, "r", "REBUILD")
    op = service.record_stop(config, stop_input(config, extra_key={"new": 1}), base)
    assert op is not None and op.status is S.scheduled
    assert op.hook is not None and op.hook.session_id == SESSION
    assert op.source_path == str(source.resolve())
    assert op.source_session_id == SESSION
    assert op.history[-1].note == "Stop received"


def _refused(config: Config, hook: StopHookInput, match: str,
             base: HarnessBase | None = None) -> None:
    op = service.request(config, "r", "REBUILD")
    changed = service.record_stop(config, hook, base)
    assert changed is not None and changed.operation_id == op.operation_id
    assert changed.status is S.failed
    assert match in changed.error, changed.error
    # Never blocks what comes next: a new request is a new operation.
    fresh = service.request(config, "again", "REBUILD")
    assert fresh.operation_id != op.operation_id and fresh.status is S.pending
    service.cancel(config, fresh.operation_id, "CANCEL")


def test_stop_outside_project_dir(config: Config, source: Path, tmp_path: Path) -> None:
    outside = tmp_path / f"{SESSION}.jsonl"
    outside.write_bytes(source.read_bytes())
    _refused(config, stop_input(config, path=outside), "is outside project_dir")


def test_stop_symlink_escape(config: Config, source: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / f"{OTHER}.jsonl"
    target.write_bytes(source.read_bytes())
    link = config.project_dir / f"{OTHER}.jsonl"
    os.symlink(target, link)
    _refused(config, stop_input(config, session=OTHER, path=link), "symlink that leads outside")


def test_stop_session_is_not_the_transcripts(config: Config, source: Path) -> None:
    _refused(config, stop_input(config, session=OTHER, path=source),
             f"session_id {OTHER} is not the transcript's")


def test_stop_from_a_session_the_target_does_not_run(config: Config, source: Path,
                                                      base: HarnessBase) -> None:
    other = config.project_dir / f"{OTHER}.jsonl"
    other.write_bytes(source.read_bytes())
    _refused(config, stop_input(config, session=OTHER), f"the target runs session {SESSION}",
             base)


@pytest.mark.parametrize(("raw", "match"), [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"session_id": 5, "transcript_path": "/x"}', "lacks session_id"),
    (b"{}", "lacks session_id"),
    (b'{"session_id": "a", "transcript_path": "relative.jsonl"}', "not absolute"),
])
def test_bad_hook_input_fails_only_that_operation(config: Config, source: Path, raw: bytes,
                                                  match: str) -> None:
    _refused(config, StopHookInput.parse(raw), match)


def test_stop_before_the_transcript_exists(config: Config, source: Path) -> None:
    """Claude Code 2.1.328 can create a new session's transcript only after its first Stop hook
    returned: the Stop schedules, and the worker waits for the file."""
    service.request(config, "test rebuild", "REBUILD")
    op = service.record_stop(config, stop_input(config, session=OTHER))
    assert op is not None and op.status is S.scheduled, op
    assert op.source_path == str(config.project_dir.resolve() / f"{OTHER}.jsonl")


def test_stop_missing_transcript_elsewhere(config: Config, source: Path,
                                           tmp_path: Path) -> None:
    _refused(config, stop_input(config, session=OTHER, path=tmp_path / f"{OTHER}.jsonl"),
             "directly in project_dir")


def test_stop_transcript_in_a_subdirectory(config: Config, source: Path) -> None:
    sub = config.project_dir / SESSION / "subagents"
    sub.mkdir(parents=True)
    inner = sub / f"{SESSION}.jsonl"
    inner.write_bytes(source.read_bytes())
    _refused(config, stop_input(config, path=inner), "directly in project_dir")


def test_stop_for_rollback(config: Config, store: OperationStore, source: Path) -> None:
    op_id = _activated(config, store, source)
    new = config.project_dir / f"{OTHER}.jsonl"
    new.write_bytes(source.read_bytes())
    service.rollback_request(config, op_id, "ROLLBACK")
    op = service.record_stop(config, stop_input(config, session=OTHER))
    assert op is not None and op.status is S.rollback_scheduled
    assert op.rollback_hook is not None and op.rollback_hook.session_id == OTHER


def test_stop_for_rollback_from_the_old_session_fails_it(config: Config, store: OperationStore,
                                                         source: Path) -> None:
    op_id = _activated(config, store, source)
    service.rollback_request(config, op_id, "ROLLBACK")
    op = service.record_stop(config, stop_input(config))
    assert op is not None and op.status is S.failed
    assert "rollback not performed" in op.error and "still runs" in op.error


def test_stop_is_fast_with_a_long_history(config: Config, source: Path,
                                          base: HarnessBase) -> None:
    for _ in range(200):
        old = service.request(config, "r", "REBUILD")
        service.cancel(config, old.operation_id, "CANCEL")
    service.request(config, "r", "REBUILD")
    started = time.perf_counter()
    op = service.record_stop(config, stop_input(config), base)
    elapsed = time.perf_counter() - started
    assert op is not None and op.status is S.scheduled
    print(f"record_stop with 200 past operations: {elapsed * 1000:.1f} ms")
    assert elapsed < 0.5, elapsed  # typically ~0.02 s; generous for slow CI machines


def test_wait(config: Config, source: Path, store: OperationStore) -> None:
    op = service.request(config, "r", "REBUILD")
    started = time.monotonic()
    seen = service.wait(config, op.operation_id, 0.1)
    assert seen is not None and seen.status is S.pending
    assert time.monotonic() - started >= 0.1
    service.cancel(config, op.operation_id, "CANCEL")
    seen = service.wait(config, op.operation_id, 5)
    assert seen is not None and seen.status is S.cancelled
    assert service.wait(config, None, 5) is None
    running = scheduled(config)
    store.transition(running.operation_id, S.running, "x")
    seen = service.wait(config, None, 0.05)
    assert seen is not None and seen.status is S.running
