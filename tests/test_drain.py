"""The installer's drain (`<state_dir>/draining`), through the real command line and daemon: the
operation already in flight runs to its end, and nothing new begins until the note is gone."""

from __future__ import annotations

from pathlib import Path

import orjson

from kael_thread_rebuild.operations import service
from tests.drill import procs
from tests.operations.harness import turn_ended
from tests.test_operation_commands import Instance, make_instance

#: The installer writes it (roles/kael_appliance/tasks/drain.yml); spelt out here.
DRAINING = "draining"
NOTE = "since 2026-12-03T13:40:00Z: new image kael-thread-rebuild:0.2.0"
REFUSED = ("kael-thread-rebuild: the installer is replacing this instance's daemon "
           f"({NOTE}); nothing was recorded: ask again in a few minutes\n")


def drain(inst: Instance) -> Path:
    note = inst.config.state_dir / DRAINING
    note.write_text(NOTE + "\n")
    return note


def test_the_switch_in_flight_completes_and_new_requests_are_refused_while_draining(
        tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "instance")
    with inst.daemon() as daemon:
        asked = inst.cli_json("request", "--reason", "before the drain", "--confirm", "REBUILD")
        name = asked["operation"]["operation_id"]
        note = drain(inst)

        # Asking again for the rebuild the drain waits for is that same rebuild, not a new one.
        joined = inst.cli_json("request", "--reason", "again", "--confirm", "REBUILD")
        assert joined["operation"]["operation_id"] == name and joined["joined_existing"]

        hook = inst.cli("hook-stop", stdin=inst.stop_json())
        assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
        waited = inst.cli("wait", "--operation", name, "--timeout", "30")
        assert waited.stdout.startswith(f"operation {name}: activated\n"), waited.stderr

        second = inst.cli("request", "--reason", "during the drain", "--confirm", "REBUILD")
        assert (second.returncode, second.stdout, second.stderr) == (1, "", REFUSED)
        assert [op.operation_id for op in service.history(inst.config)] == [name]

        back = inst.cli("rollback", "--operation", name, "--confirm", "ROLLBACK")
        assert (back.returncode, back.stderr) == (1, REFUSED)
        assert service.status(inst.config, name).status == "activated"

        note.unlink()
        op = service.status(inst.config, name)
        turn_ended(inst.config, op.new_session_id)
        reopened = inst.cli_json("rollback", "--operation", name, "--confirm", "ROLLBACK")
        assert reopened["operation"]["status"] == "rollback_pending"
        assert procs.stop_process(daemon) == 0


def test_a_note_that_is_not_a_regular_file_drains_nothing(tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "instance")
    inst.config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (inst.config.state_dir / DRAINING).symlink_to(tmp_path / "elsewhere")
    asked = inst.cli("request", "--reason", "r", "--confirm", "REBUILD", "--json")
    assert asked.returncode == 0, asked.stderr
    assert orjson.loads(asked.stdout)["operation"]["status"] == "pending"
