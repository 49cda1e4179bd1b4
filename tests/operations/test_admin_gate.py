"""The admin's gate at the service (`admin_confirm_minutes`): a request awaits confirmation, the
Stop passes it by, and the daemon cancels it once it has waited too long. The whole path with
the real MCP server, the daemon container and root's confirm: tests/appliance/test_admin_confirm.py.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationStatus, utcnow
from tests.switching.sandbox import safe_config

from .harness import stop_input, write_source


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
