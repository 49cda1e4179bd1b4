"""The admin's gate at the service (`admin_confirm_minutes`): a request awaits confirmation, the
Stop passes it by, and the daemon cancels it once it has waited too long. The whole path with
the real MCP server, the daemon container and root's confirm: tests/appliance/test_admin_confirm.py.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service, worker
from kael_thread_rebuild.operations.confirmation import confirmations_dir
from kael_thread_rebuild.operations.model import OperationStatus, utcnow
from kael_thread_rebuild.operations.store import OperationStore
from tests.builder import SESSION
from tests.switching.sandbox import safe_config

from .harness import HarnessBase, stop_input, turn_ended, write_source


def test_a_request_awaits_the_admin_and_expires(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    config = safe_config(tmp_path, activation="pointer", admin_confirm_minutes=5)
    config.project_dir.mkdir()
    write_source(config)
    requested = service.request_rebuild(config, "gate", "REBUILD")
    op = requested.operation
    assert op.status is OperationStatus.awaiting_confirmation
    assert requested.confirm_with == (f"docker exec -u 0 kael-thread-rebuild-{config.instance} "
                                      f"kael-thread-rebuild confirm --operation {op.operation_id}")
    again = service.request_rebuild(config, "gate", "REBUILD")
    assert again.joined_existing and again.operation.operation_id == op.operation_id
    assert service.record_stop(config, stop_input(config)) is None  # the Stop passes it by
    assert service.take_confirmations(config) == []  # not confirmed, not expired yet

    later = utcnow() + timedelta(minutes=5, seconds=1)
    monkeypatch.setattr(service, "utcnow", lambda: later)
    (expired,) = service.take_confirmations(config)
    assert expired.status is OperationStatus.cancelled
    assert expired.history[-1].note == "not confirmed in time"
    assert expired.error.startswith("the admin did not confirm it within 5 minute(s)")


def test_without_the_option_a_request_is_pending(tmp_path: Path) -> None:
    config = safe_config(tmp_path, activation="pointer")
    requested = service.request_rebuild(config, "no gate", "REBUILD")
    assert requested.operation.status is OperationStatus.pending
    assert requested.confirm_with == ""



@pytest.fixture
def gated(config: Config) -> Iterator[Config]:
    """The operations fixture's config with the gate on, under an instance name of its own (the
    admin's confirmations of an instance live in /tmp: removed after the test)."""
    gated = config.model_copy(update={"admin_confirm_minutes": 5,
                                      "instance": f"test-{uuid.uuid4().hex[:8]}"})
    try:
        yield gated
    finally:
        shutil.rmtree(confirmations_dir(gated), ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the admin's confirm runs as root only")
def test_rebuild_and_rollback_each_wait_for_their_own_confirmation(
        gated: Config, source: Path, base: HarnessBase, store: OperationStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    op = service.request(gated, "gate", "REBUILD")
    service.confirm(gated, op.operation_id)
    (confirmed,) = service.take_confirmations(gated)
    assert confirmed.status is OperationStatus.pending
    op = service.record_stop(gated, stop_input(gated), base)
    assert op is not None and op.status is OperationStatus.scheduled
    op = worker.run_operation(gated, store, base, op.operation_id)
    assert op.status is OperationStatus.activated, op.error
    new = op.new_session_id
    assert new is not None

    # The rollback awaits a confirmation of its own: the rebuild's does not count.
    waiting = service.rollback_request(gated, op.operation_id, "ROLLBACK")
    assert waiting.status is OperationStatus.awaiting_confirmation
    assert service.confirm_with(gated, waiting).endswith(
        f"confirm --operation {op.operation_id} --rollback")
    assert service.take_confirmations(gated) == []
    later = utcnow() + timedelta(minutes=5, seconds=1)
    monkeypatch.setattr(service, "utcnow", lambda: later)
    (expired,) = service.take_confirmations(gated)  # unconfirmed: the rebuild stays
    assert expired.status is OperationStatus.activated
    assert expired.history[-1].note.startswith("rollback not confirmed in time")
    monkeypatch.undo()

    service.rollback_request(gated, op.operation_id, "ROLLBACK")
    service.confirm(gated, op.operation_id, rollback=True)
    (confirmed,) = service.take_confirmations(gated)
    assert confirmed.status is OperationStatus.rollback_pending
    turn_ended(gated, new)
    op = service.record_stop(gated, stop_input(gated, session=new), base)
    assert op is not None and op.status is OperationStatus.rollback_scheduled
    op = worker.run_operation(gated, store, base, op.operation_id)
    assert op.status is OperationStatus.rolled_back, op.error
    assert base.pointer() == SESSION
