"""The hard gate (`admin_confirm_minutes`): a rebuild requested through the real MCP server, as
the model would call it, does not switch until the household's admin confirms it as root in
the daemon's container; nothing the Claude user can do confirms it (the same `confirm` as that
user, a confirmation file it plants, a record it edits by hand). Without the option, the
request switches at the next Stop as before (test_hook_exec.py)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import orjson
from docker.models.containers import Container
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from kael_thread_rebuild.operations.model import Operation
from tests.drill import procs
from tests.switching.sandbox import wait_until

from . import engine
from .household import Household

#: Long enough to see that nothing moves: the daemon looks at the store every 0.1 s.
QUIET_SECONDS = 1.5


def _call_through_mcp(household: Household, appliance: engine.Instance, tool: str,
                      arguments: dict[str, Any]) -> dict[str, Any]:
    """TOOL called as the model calls it: on the MCP server Claude Code starts (docker run)."""
    command = appliance.mcp_command(household.config_path, household.user)

    async def session() -> dict[str, Any]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool(tool, arguments)
            assert not result.is_error and result.structured_content is not None, result
            return dict(result.structured_content)

    return anyio.run(session)


def _status(appliance: engine.Instance, operation_id: str) -> Operation:
    code, out = appliance.exec_cli("status", "--operation", operation_id, "--json")
    assert code == 0, out
    return Operation.model_validate(orjson.loads(out)["operation"])


def _stop(household: Household, appliance: engine.Instance) -> None:
    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)
    done = engine.run_hook(appliance.hook_command(household.config_path,
                                                  household.config.state_dir), stop)
    assert done.returncode == 0, done


def _as_root(daemon: Container, *command: str) -> tuple[int, str]:
    code, output = daemon.exec_run(list(command), user="0")
    assert isinstance(code, int) and isinstance(output, bytes)
    return code, output.decode()


def test_a_request_waits_for_the_admin_and_the_model_cannot_confirm_it(
        household: Household, appliance: engine.Instance) -> None:
    procs.write_config(household.config_path, {
        **household.config.model_dump(mode="json", exclude_none=True),
        "admin_confirm_minutes": 30})
    daemon = appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")

    answer = _call_through_mcp(household, appliance, "thread_rebuild_request", {
        "reason": "the human asked for it", "confirmation": "REBUILD"})
    operation_id = answer["operation_id"]
    print(f"the model was told: {answer['next_step']}")
    assert answer["status"] == "awaiting_confirmation"
    assert (f"docker exec -u 0 kael-thread-rebuild-{household.config.instance} "
            f"kael-thread-rebuild confirm --operation {operation_id}") in answer["next_step"]
    _stop(household, appliance)
    time.sleep(QUIET_SECONDS)
    assert _status(appliance, operation_id).status.value == "awaiting_confirmation"
    assert household.pointer.read_text() == f"{household.transcript.stem}\n"

    # What the Claude user can do does not confirm it: `confirm` as that user (the daemon
    # container's own user) is refused, and a confirmation it plants is not taken.
    code, out = appliance.exec_cli("confirm", "--operation", operation_id)
    assert code == 1 and "confirm runs as root only" in out, out
    planted = f"/tmp/kael-thread-rebuild-{household.config.instance}.confirmed"
    code, out = engine.exec_in(daemon, "sh", "-c", f'mkdir -p {planted} && printf "%s\\n" '
                               f'"{operation_id} rebuild" > {planted}/{operation_id}')
    assert code == 0, out
    time.sleep(QUIET_SECONDS)
    assert _status(appliance, operation_id).status.value == "awaiting_confirmation"
    code, out = _as_root(daemon, "kael-thread-rebuild", "confirm", "--operation", operation_id)
    assert code == 1 and f"{planted} belongs to uid {engine.TEST_UID}, not root" in out, out
    code, out = engine.exec_in(daemon, "rm", "-r", planted)
    assert code == 0, out

    # The admin's confirmation, as root in the daemon's container: pending, then the Stop.
    code, out = _as_root(daemon, "kael-thread-rebuild", "confirm", "--operation", operation_id)
    print(f"the admin's confirm: {out.strip()}")
    assert code == 0 and out.startswith(f"confirmed: operation {operation_id}"), out
    wait_until(lambda: _status(appliance, operation_id).status.value == "pending", timeout=20,
               what="the daemon to take the confirmation")
    assert household.pointer.read_text() == f"{household.transcript.stem}\n"
    _stop(household, appliance)
    op = appliance.settled_operation()
    assert op.operation_id == operation_id
    assert op.status.value == "activated", op.error
    assert household.pointer.read_text() == f"{op.new_session_id}\n"
    assert [step.note for step in op.history][:2] == ["confirmed by the admin", "Stop received"]

    # Its rollback awaits a confirmation of its own (`--rollback`); cancelled, it stays activated.
    answer = _call_through_mcp(household, appliance, "thread_rebuild_rollback_request", {
        "operation_id": operation_id, "confirmation": "ROLLBACK"})
    assert answer["status"] == "awaiting_confirmation"
    assert f"confirm --operation {operation_id} --rollback" in answer["next_step"]
    time.sleep(QUIET_SECONDS)  # the rebuild's confirmation does not confirm it
    assert _status(appliance, operation_id).status.value == "awaiting_confirmation"
    code, out = appliance.exec_cli("cancel", "--operation", operation_id, "--confirm", "CANCEL")
    assert code == 0, out
    assert _status(appliance, operation_id).status.value == "activated"
    assert household.pointer.read_text() == f"{op.new_session_id}\n"


def test_a_record_edited_by_hand_does_not_switch(household: Household,
                                                 appliance: engine.Instance) -> None:
    procs.write_config(household.config_path, {
        **household.config.model_dump(mode="json", exclude_none=True),
        "admin_confirm_minutes": 30})
    appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    code, out = appliance.exec_cli("request", "--reason", "gate", "--confirm", "REBUILD",
                                   "--json")
    assert code == 0, out
    first = orjson.loads(out)["operation"]["operation_id"]
    code, out = appliance.exec_cli("cancel", "--operation", first, "--confirm", "CANCEL")
    assert code == 0, out
    assert _status(appliance, first).status.value == "cancelled"

    code, out = appliance.exec_cli("request", "--reason", "gate", "--confirm", "REBUILD")
    assert code == 0 and "once the household's admin has confirmed it as root" in out, out
    # Two ids made in one second order by their random part: the new one is the one not cancelled.
    [record] = [path for path in (household.config.state_dir / "operations").glob("*.json")
                if path.stem != first]
    data = orjson.loads(record.read_bytes())
    assert data["status"] == "awaiting_confirmation"
    data["status"] = "pending"  # what the model's shell could write: the state dir is its own
    record.write_bytes(orjson.dumps(data))
    _stop(household, appliance)
    op = appliance.settled_operation()
    assert op.status.value == "failed", op
    assert op.history[-1].note == "not confirmed"
    assert op.error.startswith("not confirmed by the admin (")
    assert household.pointer.read_text() == f"{household.transcript.stem}\n"
