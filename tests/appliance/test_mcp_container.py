"""The MCP server as Claude Code runs it: `docker run -i --rm ...` on stdio. It lists the eight
tools to the real client; within seconds of stdin closing, of a SIGTERM to `docker run`, or of
`docker run` being killed, its process has ended, and then docker removes its container."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Any

import anyio
import docker
import orjson
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.test_mcp_server import TOOLS

from . import engine
from .household import Household

#: The container's process (tini and the server) has ended: the engine's `die` event.
#: appliance.md's second from stdin closing is the server's own promise, tested on the host in
#: tests/test_mcp_server.py; here the end also crosses `docker run`, the engine and the shim both
#: ways, and the server's teardown needs about 0.25 s of CPU, which a 2-core machine at load 15
#: gives in over a second: measured up to 3 s. A server that ignored EOF or SIGTERM never ends.
EXITED_WITHIN_SECONDS = 5.0
#: Then the engine removes the container (--rm) and `docker run` returns: that is docker's work,
#: which takes seconds under load; the bound only makes a container left behind fail the test.
REMOVED_WITHIN_SECONDS = 30.0
INITIALIZE = orjson.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "appliance-test", "version": "0"}}}) + b"\n"


def test_the_real_client_lists_the_eight_tools_then_the_container_goes(
        household: Household, appliance: engine.Instance) -> None:
    command = appliance.mcp_command(household.config_path, household.user)

    async def session() -> tuple[Any, Any]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            tools = await client.list_tools()
            plan = await client.call_tool("thread_rebuild_plan", {})
            doctor = await client.call_tool("thread_rebuild_doctor", {})
            return init, (tools, plan, doctor)

    with engine.ContainerEvents(appliance) as events:
        init, (tools, plan, doctor) = anyio.run(session)
        closed = time.time()
        died = events.wait("die", REMOVED_WITHIN_SECONDS)
        events.wait("destroy", REMOVED_WITHIN_SECONDS)
    assert init.server_info.name == "kael-thread-rebuild"
    assert {tool.name for tool in tools.tools} == TOOLS
    report = plan.structured_content
    assert not plan.is_error and report is not None
    assert report["source_session_id"] == household.transcript.stem
    # The pointer dir is not mounted in the MCP container: its doctor says so, as a skip.
    assert doctor.structured_content is not None
    (target,) = [c for c in doctor.structured_content["checks"] if c["name"] == "target"]
    assert target["skipped"] and f"{household.pointer.parent} is not mounted" in target["detail"]
    assert engine.stamp(died) - closed < EXITED_WITHIN_SECONDS, (died, closed)
    assert appliance.containers("mcp") == []


def _start(command: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    answer = orjson.loads(proc.stdout.readline())
    assert answer["result"]["serverInfo"]["name"] == "kael-thread-rebuild", answer
    return proc


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM", "SIGKILL"])
def test_no_container_is_left_behind(ending: str, household: Household,
                                     appliance: engine.Instance) -> None:
    with engine.ContainerEvents(appliance) as events:
        proc = _start(appliance.mcp_command(household.config_path, household.user))
        assert [c.status for c in appliance.containers("mcp")] == ["running"]
        ended = time.time()
        if ending == "stdin closed":
            assert proc.stdin is not None
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM if ending == "SIGTERM" else signal.SIGKILL)
        died = events.wait("die", REMOVED_WITHIN_SECONDS, after=ended)
        removed = events.wait("destroy", REMOVED_WITHIN_SECONDS, after=ended)
        code = proc.wait(timeout=REMOVED_WITHIN_SECONDS)
    exited, gone = engine.stamp(died) - ended, engine.stamp(removed) - ended
    print(f"mcp container, {ending}: the server exited after {exited:.2f} s, "
          f"docker removed the container after {gone:.2f} s")
    assert exited < EXITED_WITHIN_SECONDS, f"the MCP container took {exited:.2f} s to end"
    if ending == "stdin closed":
        assert died["Actor"]["Attributes"]["exitCode"] == "0" and code == 0, (died, code)
    assert appliance.containers("mcp") == []


# What Claude Code's `initialize` must not wait for: the SDK and the engine behind the tools.
HEAVY = ("mcp", "mcp_types", "anyio", "orjson", "kael_thread_rebuild.plan",
         "kael_thread_rebuild.doctor", "kael_thread_rebuild.operations",
         "kael_thread_rebuild.conversation", "kael_thread_rebuild.interfaces.mcp_tools")
BYTECODE_CHECK = """
import importlib.util, pathlib
import kael_thread_rebuild
root = pathlib.Path(kael_thread_rebuild.__file__).parent
for source in sorted(root.rglob('*.py')):
    if not pathlib.Path(importlib.util.cache_from_source(str(source))).is_file():
        print(source.relative_to(root))
"""


def _heavy(importtime: str) -> list[str]:
    names = {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    return sorted(name for name in names
                  if any(name == top or name.startswith(f"{top}.") for top in HEAVY))


def test_initialize_and_tools_list_come_before_the_sdk_and_the_engine_are_imported(
        household: Household, appliance: engine.Instance) -> None:
    command = appliance.mcp_command(household.config_path, household.user)
    at = command.index(appliance.image)
    profiled = [*command[:at], "-e", "PYTHONPROFILEIMPORTTIME=1", *command[at:]]
    asked = INITIALIZE + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + \
        b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
    done = subprocess.run(profiled, input=asked, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["result"]["serverInfo"]["name"] == "kael-thread-rebuild"
    assert {tool["name"] for tool in answers[1]["result"]["tools"]} == TOOLS
    stderr = done.stderr.decode()
    assert "kael_thread_rebuild.config" in stderr  # the profile is real
    assert _heavy(stderr) == []


def test_the_image_holds_bytecode_for_every_module(dock: docker.DockerClient,
                                                   image: str) -> None:
    """The root file system is read-only: a module without its .pyc is compiled again at every
    start of the MCP server and the hook."""
    missing = dock.containers.run(image, ["-c", BYTECODE_CHECK],
                                  entrypoint=["/opt/kael/bin/python"], remove=True,
                                  network_mode="none", read_only=True)
    assert missing.decode() == ""
    verbose = dock.containers.run(
        image, ["-v", "-c", "import kael_thread_rebuild.interfaces.mcp_server, "
                "kael_thread_rebuild.interfaces.mcp_tools, kael_thread_rebuild.interfaces.cli, "
                "kael_thread_rebuild.interfaces.hook"],
        entrypoint=["/opt/kael/bin/python"], remove=True, network_mode="none", read_only=True,
        stdout=False, stderr=True).decode()
    compiled = [line for line in verbose.splitlines()
                if line.startswith("# code object from ") and not line.endswith(".pyc'")]
    assert "mcp_tools" in verbose and compiled == []


def test_the_images_snapshot_is_what_its_sdk_server_answers(dock: docker.DockerClient,
                                                           image: str) -> None:
    """The build re-records the start-up snapshot from the installed code and SDK."""
    check = ("import json; from kael_thread_rebuild.interfaces.mcp_server import SNAPSHOT; "
             "from kael_thread_rebuild.interfaces.mcp_tools import record_snapshot; "
             "print(json.loads(SNAPSHOT.read_bytes()) == record_snapshot())")
    same = dock.containers.run(image, ["-c", check], entrypoint=["/opt/kael/bin/python"],
                               remove=True, network_mode="none", read_only=True)
    assert same.decode().strip() == "True"
