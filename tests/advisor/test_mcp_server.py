"""The `kael-advisor-mcp` process over stdio, with the real Kimi Code CLI behind it: the five
tools listed, a consult / poll round trip, a one-line error for bad input, a finished answer
and an interrupted consultation seen by the next server, and Claude Code 2.1.328's timed-out
`server/discover` probe."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from kael_advisor.tools import TOOLS
from tests.advisor.advisor_env import MCP_BIN, prompt, running_in
from tests.advisor.kimi_fixture import Advised, advised, needs_kimi
from tests.support.standin_openai import Reply
from tests.test_mcp_startup import PROBE_TIMED_OUT, _answer, _imported

__all__ = ["advised"]  # fixture
T = TypeVar("T")
CONVERSATION = "5e55104e-aaaa-bbbb-cccc-dddddddddddd"


def _server(advised: Advised, body: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def run() -> T:
        params = StdioServerParameters(command=str(MCP_BIN), cwd=str(advised.project),
                                       env={**os.environ, **advised.env()})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(run)


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def _poll_until_done(session: ClientSession, number: str) -> str:
    for _ in range(600):
        said = _text(await session.call_tool("advisor_poll", {"task": number}))
        if not said.startswith("⏳"):
            return said
        await anyio.sleep(0.2)
    raise AssertionError(f"#{number} still running")


@needs_kimi
def test_tools_listed_and_a_consultation_round_trip(advised: Advised) -> None:
    prompt(advised.sessions, CONVERSATION, advised.project)
    advised.api.queue(Reply("Build it in three steps."))

    async def body(session: ClientSession) -> tuple[Any, str, str, CallToolResult]:
        listed = await session.list_tools()
        started = _text(await session.call_tool("advisor_consult", {
            "message": "How do I build it?", "mode": "blueprint"}))
        answer = await _poll_until_done(session, "t1")
        refused = await session.call_tool("advisor_consult", {"message": "x", "mode": "nope"})
        return listed, started, answer, refused

    listed, started, answer, refused = _server(advised, body)

    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools) == [found.name for found in TOOLS]
    for found in TOOLS:
        assert tools[found.name].annotations.read_only_hint is found.read_only
        assert (found.permission == "allow") is found.read_only
    assert started.startswith("⏳ consultation started #t1")
    assert answer.startswith("✅ consultation #t1") and "Build it in three steps." in answer
    assert refused.is_error and _text(refused).count("\n") == 0
    assert "unknown mode 'nope'" in _text(refused)

    async def later(session: ClientSession) -> str:  # the next server, after a restart
        return _text(await session.call_tool("advisor_poll", {"task": "t1"}))

    assert "Build it in three steps." in _server(advised, later)
    owners = advised.project / ".agent" / "advisor-consultations" / ".owners"
    assert list(owners.iterdir()) == []  # each server took its lock file away when it ended


@needs_kimi
def test_a_consultation_cut_by_the_server_ending_is_interrupted(advised: Advised) -> None:
    prompt(advised.sessions, CONVERSATION, advised.project)
    advised.api.queue(Reply(hang=True))

    async def body(session: ClientSession) -> str:
        started = _text(await session.call_tool("advisor_consult", {"message": "slow one"}))
        await anyio.to_thread.run_sync(advised.api.wait_for_chats, 1)  # the advisor waits
        return started

    assert _server(advised, body).startswith("⏳ consultation started #t1")
    deadline = time.monotonic() + 10
    while running_in(advised.project) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running_in(advised.project) == [], "the ended server left its Kimi Code CLI running"
    advised.api.release()

    async def later(session: ClientSession) -> str:
        return _text(await session.call_tool("advisor_poll", {"task": "t1"}))

    said = _server(advised, later)
    assert said.startswith("⚠ consultation #t1 was interrupted"), said


def test_a_tool_call_after_a_timed_out_probe_is_served(tmp_path: Any) -> None:
    lines = [line.replace(b"thread_rebuild_status", b"advisor_list_tasks")
             for line in PROBE_TIMED_OUT]
    proc = subprocess.Popen([str(MCP_BIN)], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KAEL_ADVISOR_SESSIONS": str(tmp_path / "s")})
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"".join(lines))
        proc.stdin.flush()
        answer = _answer(proc, 4)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)

    assert not answer["result"].get("isError"), answer
    assert "no advisor tasks in this project yet" in json.dumps(answer["result"])


def test_the_handshake_is_answered_without_the_sdk(tmp_path: Any) -> None:
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    started = time.monotonic()
    done = subprocess.run([str(MCP_BIN.parent / "python"), "-X", "importtime", str(MCP_BIN)],
                          cwd=tmp_path, input=json.dumps(hello).encode() + b"\n",
                          capture_output=True, timeout=60, check=True)

    assert json.loads(done.stdout)["result"]["serverInfo"]["name"] == "advisor-mcp"
    imported = _imported(done.stderr.decode())
    assert "kael_advisor.mcp_server" in imported
    assert {name.split(".")[0] for name in imported} & {"mcp", "pydantic", "anyio"} == set()
    assert time.monotonic() - started < 30


def test_a_project_that_is_gone_is_one_line(tmp_path: Any) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && exec "$2" </dev/null', "sh",
                           str(gone), str(MCP_BIN)], capture_output=True, text=True,
                          timeout=60, check=False)

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kael-advisor-mcp: the working directory (the project) is gone: " \
        "No such file or directory\n"
