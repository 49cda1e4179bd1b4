"""The reload through the command line: its confirmation word, joining one that waits, refusing
while another operation is in flight, never waiting for the admin's gate, never rolled back, and
a rebuild that switched before it still the one rollback goes back from."""

from __future__ import annotations

from pathlib import Path

from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationKind, OperationStatus
from tests.builder import SESSION
from tests.drill import procs
from tests.operations.harness import turn_ended
from tests.test_operation_commands import Instance, make_instance

S = OperationStatus


def settle_reload(inst: Instance) -> str:
    """Request a reload, hand it the Stop, let the daemon run it; its operation id."""
    asked = inst.cli_json("reload", "--confirm", "RELOAD")
    assert asked["joined_existing"] is False
    name: str = asked["operation"]["operation_id"]
    assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
    op = procs.wait_for_status(inst.config, procs.SETTLED, timeout=30)
    assert op.operation_id == name and op.status is S.activated, op.error
    return name


def test_a_reload_needs_its_word_joins_one_waiting_and_is_refused_while_a_rebuild_waits(
        tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "instance")
    wrong = inst.cli("reload", "--confirm", "REBUILD")
    assert (wrong.returncode, wrong.stdout) == (1, "")
    assert wrong.stderr == ("kael-thread-rebuild: to request a reload, the confirmation must be "
                            "exactly RELOAD\n")
    asked = inst.cli("reload", "--confirm", "RELOAD")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("reload requested; it runs after the current reply")
    again = inst.cli_json("reload", "--confirm", "RELOAD")
    assert again["joined_existing"] is True
    rebuild = inst.cli("request", "--reason", "r", "--confirm", "REBUILD")
    assert rebuild.returncode == 1
    assert "(a reload) is pending; wait for it to finish" in rebuild.stderr
    (op,) = service.history(inst.config)
    assert op.kind is OperationKind.reload and op.status is S.pending
    cancelled = inst.cli("cancel", "--operation", op.operation_id, "--confirm", "CANCEL")
    assert cancelled.returncode == 0, cancelled.stderr
    assert service.history(inst.config)[0].status is S.cancelled


def test_a_reload_runs_without_the_admins_gate_and_cannot_be_rolled_back(tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "instance", admin_confirm_minutes=5)
    with inst.daemon():
        name = settle_reload(inst)
    op = service.status(inst.config, name)
    assert op is not None and op.new_session_id == op.source_session_id == SESSION
    assert op.candidate_path is None and op.backup_path is None
    assert inst.pointer.read_text() == f"{SESSION}\n"
    assert [step.to_status for step in op.history] == [
        S.scheduled, S.running, S.verifying, S.activating, S.activated]
    back = inst.cli("rollback", "--operation", name, "--confirm", "ROLLBACK")
    assert back.returncode == 1
    assert "is a reload: it resumed the session that ran" in back.stderr


def test_a_reload_after_a_rebuild_leaves_the_rebuild_to_roll_back(tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "instance")
    with inst.daemon():
        asked = inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")
        assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
        rebuilt = procs.wait_for_status(inst.config, procs.SETTLED, timeout=30)
        assert rebuilt.status is S.activated, rebuilt.error
        new = rebuilt.new_session_id
        assert new is not None
        reload = inst.cli_json("reload", "--confirm", "RELOAD")["operation"]["operation_id"]
        turn_ended(inst.config, new)  # a turn of the rebuilt session, which the Stop ends
        assert inst.cli("hook-stop", stdin=inst.stop_json(new)).returncode == 0
        op = procs.wait_for_status(inst.config, procs.SETTLED, timeout=30)
        assert op.operation_id == reload and op.status is S.activated, op.error
        back = inst.cli("rollback", "--operation", asked["operation"]["operation_id"],
                        "--confirm", "ROLLBACK")
        assert back.returncode == 0, back.stderr
