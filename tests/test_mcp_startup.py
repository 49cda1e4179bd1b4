"""The MCP server's start-up path: Claude Code gives it about 3 s to answer `initialize`, so it
answers `initialize` and the list requests before importing the MCP SDK or the engine, with
exactly the answers the SDK server gives, and hands over to the SDK server at the first tool
call."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from kael_thread_rebuild.interfaces.mcp_server import SNAPSHOT
from kael_thread_rebuild.interfaces.mcp_tools import record_snapshot
from tests.test_mcp_server import MCP_BIN, TOOLS, config, config_path, transcript

__all__ = ["config", "config_path", "transcript"]  # fixtures

# What answering `initialize` must not wait for: the SDK and the engine behind the tools.
HEAVY = ("mcp", "mcp_types", "anyio", "orjson", "kael_thread_rebuild.plan",
         "kael_thread_rebuild.doctor", "kael_thread_rebuild.operations",
         "kael_thread_rebuild.conversation", "kael_thread_rebuild.interfaces.mcp_tools")


def _request(number: int | str, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def _imported(importtime: str) -> set[str]:
    """Module names from `python -X importtime` output."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and line.count("|") == 2} - {"package"}


# Claude Code 2.1.328's opening, as it sends it: every request names its protocol version.
CLAUDE_META = {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {
        "name": "claude-code", "title": "Claude Code", "version": "2.1.328",
        "description": "Anthropic's agentic coding tool",
        "websiteUrl": "https://claude.com/claude-code"},
    "io.modelcontextprotocol/clientCapabilities": {
        "roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}}}
LISTEN = {"notifications": {"toolsListChanged": True, "promptsListChanged": True,
                            "resourcesListChanged": True}}
OPENINGS = {
    "initialize": [
        _request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "startup-test", "version": "0"}}),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        _request(1, "tools/list"), _request(2, "prompts/list"), _request(3, "resources/list"),
    ],
    "server/discover (Claude Code 2.1.328)": [
        _request("probe", "server/discover", CLAUDE_META),
        _request("listen:0", "subscriptions/listen", {**CLAUDE_META, **LISTEN}),
        _request(0, "server/discover", CLAUDE_META), _request(1, "prompts/list", CLAUDE_META),
        _request(2, "resources/list", CLAUDE_META), _request(3, "tools/list", CLAUDE_META),
    ],
}


# Claude Code 2.1.328 with a server slower to start than its probe's bound: the probe, then the
# handshake, and the tool call without `_meta`.
PROBE_TIMED_OUT = [
    _request("server-discover-probe-1", "server/discover", CLAUDE_META),
    *OPENINGS["initialize"],
    _request(4, "tools/call", {"name": "thread_rebuild_status", "arguments": {}}),
]


def _answers(proc: subprocess.Popen[bytes], ids: set[object],
             timeout: float = 60) -> dict[object, dict[str, Any]]:
    """The server's answers (messages with an id, null included) until IDS all have one."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    answers: dict[object, dict[str, Any]] = {}
    pending = b""
    while not ids <= set(answers):
        left = deadline - time.monotonic()
        assert left > 0, f"no answer to {sorted(map(str, ids - set(answers)))} in {timeout:.0f} s"
        if select.select([proc.stdout], [], [], left)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"the server closed; unanswered: {ids - set(answers)}"
            pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "id" in message:
                answers[message["id"]] = message
    return answers


def _answer(proc: subprocess.Popen[bytes], number: int, timeout: float = 60) -> dict[str, Any]:
    """The server's answer to request NUMBER, read as it comes."""
    return _answers(proc, {number}, timeout)[number]


def test_a_tool_call_after_a_timed_out_probe_is_served(config_path: Path) -> None:
    proc = subprocess.Popen([str(MCP_BIN), "--config", str(config_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"".join(PROBE_TIMED_OUT))
        proc.stdin.flush()
        answer = _answer(proc, 4)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)

    assert "error" not in answer, answer
    assert not answer["result"].get("isError"), answer
    assert answer["result"]["structuredContent"] == {"found": False, "operation": None}


@pytest.mark.parametrize("opening", list(OPENINGS))
def test_the_opening_is_answered_without_the_sdk_or_the_engine(
        opening: str, config_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-X", "importtime", str(MCP_BIN), "--config",
                           str(config_path)], input=b"".join(OPENINGS[opening]),
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    answered = {answer["id"]: answer["result"] for answer in answers if "id" in answer}
    asked = [json.loads(line) for line in OPENINGS[opening]]
    assert set(answered) == {request["id"] for request in asked
                             if "id" in request and request["method"] != "subscriptions/listen"}
    tools_list = next(request["id"] for request in asked if request.get("method") == "tools/list")
    assert {tool["name"] for tool in answered[tools_list]["tools"]} == TOOLS
    assert all(answer.get("result", {}).get("serverInfo", {}).get("name", "kael-thread-rebuild")
               == "kael-thread-rebuild" for answer in answers)
    imported = _imported(proc.stderr.decode())
    assert "kael_thread_rebuild.config" in imported  # the report is real
    heavy = sorted(name for name in imported
                   if any(name == top or name.startswith(f"{top}.") for top in HEAVY))
    assert heavy == []


def test_the_snapshot_is_what_the_sdk_server_answers() -> None:
    """Regenerate with `python -m kael_thread_rebuild.interfaces.mcp_tools` after changing a
    tool, the instructions, the version or the SDK."""
    assert json.loads(SNAPSHOT.read_bytes()) == record_snapshot()


def test_the_real_client_sees_the_same_tools_before_and_after_the_first_call(
        config_path: Path, transcript: Any) -> None:
    async def session() -> tuple[Any, Any, Any]:
        params = StdioServerParameters(command=str(MCP_BIN), args=["--config", str(config_path)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            before = await client.list_tools()  # from the start-up path
            plan = await client.call_tool("thread_rebuild_plan", {})  # hands over to the SDK
            after = await client.list_tools()  # from the SDK server
            return before, plan, after

    before, plan, after = anyio.run(session)
    assert not plan.is_error and plan.structured_content is not None
    assert plan.structured_content["source_session_id"] == transcript[0].stem
    assert [tool.model_dump() for tool in before.tools] == \
        [tool.model_dump() for tool in after.tools]
    assert {tool.name for tool in before.tools} == TOOLS


# One line nested 50,000 levels deep: a bare one (no id to answer to), and a tool call whose
# arguments nest that deep (its id is at the top level).
DEEP = b"[" * 50_000 + b"\n"
DEEP_CALL = _request(5, "tools/call", {"name": "thread_rebuild_status",
                                       "arguments": {"operation_id": "X"}}).replace(
    b'"X"', b"[" * 50_000 + b"]" * 50_000)
STATUS = {4: _request(4, "tools/call", {"name": "thread_rebuild_status", "arguments": {}}),
          6: _request(6, "tools/call", {"name": "thread_rebuild_status", "arguments": {}})}
DEEP_PLACES = {
    "before initialize": [DEEP, DEEP_CALL, *OPENINGS["initialize"], STATUS[4]],
    "after the opening": [*OPENINGS["initialize"], DEEP, DEEP_CALL, STATUS[4]],
    "after a tool call (the SDK server)": [*OPENINGS["initialize"], STATUS[4], DEEP, DEEP_CALL,
                                           STATUS[6]],
}


@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_a_deeply_nested_line_is_answered_and_the_server_serves_on(
        place: str, config_path: Path) -> None:
    proc = subprocess.Popen([str(MCP_BIN), "--config", str(config_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    calls = [number for number, line in STATUS.items() if line in DEEP_PLACES[place]]
    try:
        try:
            for line in DEEP_PLACES[place]:
                proc.stdin.write(line)
                proc.stdin.flush()
        except BrokenPipeError:
            pytest.fail(f"the server ended: {proc.stderr.read().decode()[-2000:]}")
        answers = _answers(proc, {None, 5, *calls})
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=30)
    assert code == 0 and b"Traceback" not in proc.stderr.read()
    refusal = {"code": -32700, "message": "Parse error: the message nests deeper than 100 levels"}
    assert answers[None]["error"] == refusal and answers[5]["error"] == refusal
    for number in calls:
        assert answers[number]["result"]["structuredContent"] == {"found": False,
                                                                  "operation": None}
