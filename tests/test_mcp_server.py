"""The MCP server over a real stdio session: the eight tools, their errors, and the real client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.plan import build_plan
from tests.builder import SESSION, TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.guard import assert_safe_target
from tests.support.claude_env import claude_available, make_claude_env, run_print
from tests.support.standin_api import Reply, StandinAPI, Text, ToolUse, prompt_script

MCP_BIN = Path(sys.executable).with_name("kael-thread-rebuild-mcp")
TOOLS = {
    "thread_rebuild_doctor", "thread_rebuild_dirty", "thread_rebuild_plan",
    "thread_rebuild_status", "thread_rebuild_request", "thread_rebuild_cancel",
    "thread_rebuild_rollback_request", "thread_rebuild_reload",
}
READ_ONLY = {"thread_rebuild_doctor", "thread_rebuild_dirty", "thread_rebuild_plan",
             "thread_rebuild_status"}
T = TypeVar("T")


def write_config(config: Config, path: Path) -> Path:
    """CONFIG as a TOML file (JSON strings, numbers, booleans and arrays are valid TOML)."""
    assert_safe_target(config)
    data = config.model_dump(mode="json", exclude_none=True)
    path.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in data.items()))
    return path


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


@pytest.fixture
def config_path(config: Config, tmp_path: Path) -> Path:
    return write_config(config, tmp_path / "config.toml")


@pytest.fixture
def transcript(config: Config) -> tuple[Path, TranscriptBuilder]:
    b = TranscriptBuilder()
    b.first_turn_attachments()
    b.user("Please keep the number 4711 in mind.")
    b.thinking()
    b.tool_call("Bash", "x" * 2000, text="Checking the notes first.")
    b.say("Noted: 4711.")
    b.user("And what was it again?")
    b.say("It was 4711.")
    return b.write(config.project_dir / f"{SESSION}.jsonl"), b


def with_session(config_path: Path, body: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def run() -> T:
        params = StdioServerParameters(command=str(MCP_BIN), args=["--config", str(config_path)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(run)


async def call(session: ClientSession, name: str, **arguments: Any) -> CallToolResult:
    result = await session.call_tool(name, arguments)
    assert isinstance(result, CallToolResult)
    return result


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def test_lists_exactly_the_eight_tools_with_honest_annotations(config_path: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return await session.list_tools()

    tools = {tool.name: tool for tool in with_session(config_path, body).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.annotations is not None
        assert tool.output_schema is not None, name
        if name in READ_ONLY:
            assert tool.annotations.read_only_hint is True, name
            assert tool.annotations.destructive_hint is False, name
        else:
            assert tool.annotations.read_only_hint is False, name
            assert tool.annotations.destructive_hint is True, name
    assert set(tools["thread_rebuild_request"].input_schema["required"]) == {"reason",
                                                                            "confirmation"}
    assert set(tools["thread_rebuild_cancel"].input_schema["required"]) == {"operation_id",
                                                                           "confirmation"}
    assert tools["thread_rebuild_reload"].input_schema["required"] == ["confirmation"]


def test_instructions_say_preview_ask_request_then_finish(config_path: Path) -> None:
    async def run() -> Any:
        params = StdioServerParameters(command=str(MCP_BIN), args=["--config", str(config_path)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await session.initialize()

    init = anyio.run(run)
    assert init.server_info.name == "kael-thread-rebuild"
    text = init.instructions or ""
    for needle in ("thread_rebuild_doctor", "thread_rebuild_plan", "ask", "REBUILD",
                   "after your reply ends", "never request twice"):
        assert needle in text


def test_read_only_tools_report_without_conversation_text(
        config: Config, config_path: Path, transcript: tuple[Path, TranscriptBuilder]) -> None:
    path, builder = transcript

    async def body(session: ClientSession) -> dict[str, CallToolResult]:
        return {
            "plan": await call(session, "thread_rebuild_plan"),
            "plan_by_path": await call(session, "thread_rebuild_plan", transcript=str(path)),
            "dirty": await call(session, "thread_rebuild_dirty"),
            "status": await call(session, "thread_rebuild_status"),
            "doctor": await call(session, "thread_rebuild_doctor"),
            "outside": await call(session, "thread_rebuild_plan", transcript="/etc/hostname"),
        }

    results = with_session(config_path, body)
    expected = build_plan(config, path).report.model_dump(mode="json")
    assert results["plan"].structured_content == expected
    assert results["plan_by_path"].structured_content == expected
    assert json.loads(text_of(results["plan"])) == expected
    assert results["dirty"].structured_content == expected["dirty"]
    assert expected["source_turns"] == 2 and expected["dirty"]["categories"]["tool_result"] > 0
    assert results["status"].structured_content == {"found": False, "operation": None}
    doctor = results["doctor"].structured_content
    assert doctor is not None and doctor["ok"] is False  # no tmux target in this sandbox
    assert {check["name"] for check in doctor["checks"]} >= {"project_dir", "target"}
    assert results["outside"].is_error and "outside project_dir" in text_of(results["outside"])

    for name, result in results.items():
        shown = json.dumps(result.structured_content, ensure_ascii=False) + text_of(result)
        for _, speech in builder.expected:
            assert speech not in shown, (name, speech)


def test_request_join_status_cancel_and_wrong_words(config: Config, config_path: Path) -> None:
    async def body(session: ClientSession) -> dict[str, CallToolResult]:
        out = {
            "wrong": await call(session, "thread_rebuild_request", reason="tidy up",
                                confirmation="rebuild"),
            "first": await call(session, "thread_rebuild_request", reason="tidy up",
                                confirmation="REBUILD"),
            "second": await call(session, "thread_rebuild_request", reason="again",
                                 confirmation="REBUILD"),
        }
        op_id = out["first"].structured_content["operation_id"]
        out["status"] = await call(session, "thread_rebuild_status", operation_id=op_id)
        out["rollback_word"] = await call(session, "thread_rebuild_rollback_request",
                                          operation_id=op_id, confirmation="yes")
        out["rollback_pending"] = await call(session, "thread_rebuild_rollback_request",
                                             operation_id=op_id, confirmation="ROLLBACK")
        out["cancel_word"] = await call(session, "thread_rebuild_cancel", operation_id=op_id,
                                        confirmation="REBUILD")
        out["cancel"] = await call(session, "thread_rebuild_cancel", operation_id=op_id,
                                   confirmation="CANCEL")
        out["unknown"] = await call(session, "thread_rebuild_status", operation_id="nope")
        return out

    out = with_session(config_path, body)
    assert out["wrong"].is_error and "REBUILD" in text_of(out["wrong"])
    first = out["first"].structured_content
    assert first is not None and not out["first"].is_error
    assert first["status"] == "pending" and first["joined_existing"] is False
    assert "finish your reply" in first["next_step"]
    second = out["second"].structured_content
    assert second is not None
    assert second["operation_id"] == first["operation_id"] and second["joined_existing"] is True
    status = out["status"].structured_content
    assert status is not None and status["found"] is True
    assert status["operation"]["status"] == "pending"
    assert status["operation"]["requested_by"] == "mcp"
    assert out["rollback_word"].is_error and "ROLLBACK" in text_of(out["rollback_word"])
    assert out["rollback_pending"].is_error and "activated" in text_of(out["rollback_pending"])
    assert out["cancel_word"].is_error and "CANCEL" in text_of(out["cancel_word"])
    cancelled = out["cancel"].structured_content
    assert cancelled is not None and cancelled["status"] == "cancelled"
    assert out["unknown"].is_error and "nope" in text_of(out["unknown"])

    ops = service.history(config)
    assert [op.status.value for op in ops] == ["cancelled"]
    assert ops[0].reason == "tidy up"


def _initialize_line() -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "test", "version": "0"}}}
    return json.dumps(message).encode() + b"\n"


def test_exits_within_a_second_after_stdin_closes(config_path: Path) -> None:
    proc = subprocess.Popen([str(MCP_BIN), "--config", str(config_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_initialize_line())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "kael-thread-rebuild"
        closed = time.monotonic()
        proc.stdin.close()
        code = proc.wait(timeout=5)
        elapsed = time.monotonic() - closed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0
    assert elapsed < 1.0, f"took {elapsed:.2f} s to exit"


@pytest.mark.parametrize("content, problem", [
    (None, "file not found"),
    ("project_dir = 'relative'\n", "must be an absolute path"),
    ("project_dir = '/x'\nbogus = 1\n", "bogus: unknown key"),
])
def test_config_errors_print_one_line_and_exit_2(tmp_path: Path, content: str | None,
                                                 problem: str) -> None:
    path = tmp_path / "bad.toml"
    if content is not None:
        path.write_text(content)
    proc = subprocess.run([str(MCP_BIN), "--config", str(path)], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and problem in lines[0] and lines[0].startswith(
        "kael-thread-rebuild-mcp: ")


def test_config_from_the_environment(config_path: Path) -> None:
    proc = subprocess.run([str(MCP_BIN)], input=b"", capture_output=True, timeout=30,
                          check=False, env={"KAEL_REBUILD_CONFIG": str(config_path),
                                            "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    missing = subprocess.run([str(MCP_BIN)], input=b"", capture_output=True, timeout=30,
                             check=False, env={"PATH": "/usr/bin:/bin"})
    assert missing.returncode == 2 and b"KAEL_REBUILD_CONFIG" in missing.stderr


# -- with the real Claude Code -------------------------------------------------------------------

PLAN_TOOL = "mcp__kael-thread-rebuild__thread_rebuild_plan"
PROMPT = "Show me the rebuild plan, please."


def _tool_result_text(body: dict[str, Any]) -> str | None:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, str):
                    return inner
                return "".join(part.get("text", "") for part in inner or []
                               if isinstance(part, dict))
    return None


@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed")
@pytest.mark.parametrize("start_seconds", [0, 6], ids=["prompt-start", "slower-than-the-probe"])
def test_real_claude_calls_the_plan_tool(
        config: Config, config_path: Path, tmp_path: Path,
        transcript: tuple[Path, TranscriptBuilder], start_seconds: int) -> None:
    """Also when the server starts slower than Claude Code waits for its `server/discover`
    probe (a container on a loaded household): Claude Code then falls back to `initialize`,
    and the tool call must still be served."""
    path, _ = transcript
    script = {PROMPT: [Reply([ToolUse(PLAN_TOOL, {})]), Reply([Text("Here is the plan.")])]}
    command = [str(MCP_BIN), "--config", str(config_path)]
    if start_seconds:
        command = ["sh", "-c", f'sleep {start_seconds}; exec "$@"', "slow-start", *command]
    servers = {"kael-thread-rebuild": {"type": "stdio", "command": command[0],
                                       "args": command[1:], "env": {}}}
    with StandinAPI(prompt_script(script)) as api:
        env = make_claude_env(tmp_path / "claude", api.url, allow=["mcp__kael-thread-rebuild"],
                              mcp_servers=servers)
        result = run_print(env, PROMPT, timeout=120)
        bodies = api.message_bodies()

    assert "Here is the plan." in result.stdout
    answered = [text for text in map(_tool_result_text, bodies) if text is not None]
    assert answered, "Claude Code never sent a tool result back"
    expected = build_plan(config, path).report.model_dump(mode="json")
    assert json.loads(answered[0]) == expected
