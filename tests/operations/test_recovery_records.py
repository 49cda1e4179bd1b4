"""What recovery writes in the record of a worker killed (SIGKILL) at a named step: every file the
worker left is named by the record (or is not there at all)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from kael_thread_rebuild.operations import worker
from kael_thread_rebuild.operations.model import OperationStatus
from tests.builder import SESSION
from tests.conftest import ConfigFactory

from .harness import scheduled
from .test_recovery import check_truth, make_env, run_killed_at

S = OperationStatus


@pytest.mark.parametrize("kill_at", ["plan", "wait_stable"])
def test_a_backup_the_killed_worker_made_is_named_by_the_record(
        make_config: ConfigFactory, tmp_path: Path, kill_at: str) -> None:
    env = make_env(make_config, tmp_path)
    op = scheduled(env.config, env.base)
    source_bytes = env.source.read_bytes()
    code, steps = run_killed_at(env, op, kill_at, lambda step: None)
    assert code == -signal.SIGKILL and steps[-1] == kill_at, (code, steps)
    backup = env.config.state_dir / "backups" / op.operation_id / f"{SESSION}.jsonl"
    assert backup.read_bytes() == source_bytes  # the copy is made before its name is recorded

    (settled,) = worker.recover(env.config, env.store, env.fresh_base())

    assert settled.status is S.failed, settled.error
    assert settled.backup_path == str(backup)
    assert Path(settled.backup_path).read_bytes() == source_bytes
    check_truth(env, settled, source_bytes)


def test_no_backup_is_named_when_none_was_made(make_config: ConfigFactory,
                                               tmp_path: Path) -> None:
    env = make_env(make_config, tmp_path)
    op = scheduled(env.config, env.base)
    code, steps = run_killed_at(env, op, "backup", lambda step: None)
    assert code == -signal.SIGKILL and steps[-1] == "backup"
    (settled,) = worker.recover(env.config, env.store, env.fresh_base())
    assert settled.status is S.failed and settled.backup_path is None
    assert not (env.config.state_dir / "backups" / op.operation_id / f"{SESSION}.jsonl").exists()
