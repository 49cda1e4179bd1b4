"""A daemon container killed with `docker kill` in the middle of a switch stays down (its restart
policy does not bring back a container killed on purpose), and the operation it drove stays
`activating`. Doctor, in the MCP server's container (another pid namespace than the daemon's,
where `/proc/locks` does not show the daemon's lock) and in run-doctor.sh's one-off container,
names the daemon that is not running first, and counts the operation as stuck at once."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.switching.sandbox import wait_until

from . import engine
from .household import Household

#: The switch's health window: the daemon is `activating` for this long, the kill falls in it.
WINDOW_SECONDS = 60


def _mcp_doctor(appliance: engine.Instance, household: Household) -> dict[str, Any]:
    """The report of the MCP tool `thread_rebuild_doctor`, from the MCP server's container."""
    command = appliance.mcp_command(household.config_path, household.user)

    async def call() -> dict[str, Any]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("thread_rebuild_doctor", {})
            assert result.structured_content is not None, result
            return result.structured_content
    return anyio.run(call)


def _failing(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [check for check in report["checks"] if not check["ok"]]


def _status(appliance: engine.Instance) -> dict[str, Any]:
    code, out = appliance.exec_cli("status", "--json")
    assert code == 0, out
    operation: dict[str, Any] = orjson.loads(out)["operation"]
    return operation


def test_doctor_names_a_killed_daemon_first(household: Household,
                                            appliance: engine.Instance) -> None:
    text = household.config_path.read_text()
    household.config_path.write_text(
        text.replace("health_window_seconds = 0.5",
                     f"health_window_seconds = {WINDOW_SECONDS}\n"
                     f"health_timeout_seconds = {WINDOW_SECONDS}"))
    daemon = appliance.run_daemon(household.config_path, household.user)
    state = household.config.state_dir
    engine.wait_for_log(state / "worker.log", "daemon ready")

    serving = _mcp_doctor(appliance, household)
    (daemon_check,) = [c for c in serving["checks"] if c["name"] == "daemon"]
    assert daemon_check["ok"] and not daemon_check["warning"], daemon_check
    assert daemon_check["detail"].startswith(f"a daemon serves {state}"), daemon_check

    code, out = appliance.exec_cli("request", "--reason", "killed daemon", "--confirm", "REBUILD")
    assert code == 0, out
    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)
    assert engine.run_hook(appliance.hook_command(household.config_path, state),
                           stop).returncode == 0
    op = wait_until(lambda: (o := _status(appliance)) and o["status"] == "activating" and o,
                    timeout=60, what="the switch to be under way")
    daemon.kill()  # `docker kill`: SIGKILL, and the container stays down
    daemon.reload()
    assert daemon.status == "exited"

    for where, report in (("the MCP server's container", _mcp_doctor(appliance, household)),
                          ("run-doctor.sh", appliance.doctor(household.config_path,
                                                             household.user))):
        failing = _failing(report)
        print(f"{where}: " + " | ".join(f"FAIL {c['name']}: {c['detail']}" for c in failing))
        assert not report["ok"] and failing[0]["name"] == "daemon", (where, failing)
        assert f"no daemon serves {state}: nobody holds {state / 'daemon.lock'}" in \
            failing[0]["detail"], failing[0]
        assert f"operation {op['operation_id']} was left activating" in failing[0]["detail"]
        assert "docker start" in failing[0]["fix"]
        (operations,) = [c for c in failing if c["name"] == "operations"]
        assert f"{op['operation_id']} has been activating for" in operations["detail"]
        assert "no daemon serves the state dir" in operations["detail"]
