"""The test support code itself: the stand-in API, the isolated runs of the real binary, the tmux
runner, the project-dir encoding, the fidelity helpers and the committed fixtures."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.claude_env import (
    TmuxClaude,
    claude_available,
    encode_project_path,
    java_string_hash,
    make_claude_env,
    project_dir_for,
    run_print,
)
from tests.support.fidelity import (
    conversation_texts,
    non_text_block_types,
    request_texts,
    resume_and_capture,
)
from tests.support.standin_api import (
    RedactedThinking,
    Reply,
    StandinAPI,
    Text,
    Thinking,
    ToolUse,
    prompt_script,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["content-type"], response.read()


def _sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_standin_streams_every_block_kind() -> None:
    tool_input = {"command": "echo 你好", "nested": {"list": [1, 2, 3]}, "long": "x" * 200}
    reply = Reply(
        [
            Thinking("step by step 思考", signature="sig=="),
            RedactedThinking("opaque=="),
            Text("answer with emoji 🎉 and a long tail " + "y" * 100),
            ToolUse("Bash", tool_input, id="toolu_fixed"),
        ]
    )
    with StandinAPI(lambda body: reply) as api:
        content_type, raw = _post(
            f"{api.url}/v1/messages?beta=true",
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        bodies = api.message_bodies()
    assert content_type.startswith("text/event-stream")
    events = _sse(raw)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    assert [blocks[i] for i in sorted(blocks)] == [
        {"type": "thinking", "thinking": "step by step 思考", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "answer with emoji 🎉 and a long tail " + "y" * 100},
        {"type": "tool_use", "id": "toolu_fixed", "name": "Bash", "input": tool_input},
    ]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert bodies == [
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ]


def test_standin_answers_json_and_count_tokens() -> None:
    with StandinAPI(lambda body: [Text("plain")]) as api:
        _, raw = _post(f"{api.url}/v1/messages", {"model": "m", "messages": []})
        _, counted = _post(f"{api.url}/v1/messages/count_tokens", {"messages": []})
        assert api.message_bodies() == [{"model": "m", "messages": []}]
    message = json.loads(raw)
    assert message["content"] == [{"type": "text", "text": "plain"}]
    assert message["stop_reason"] == "end_turn" and message["role"] == "assistant"
    assert json.loads(counted)["input_tokens"] >= 1


def test_prompt_script_steps_through_tool_rounds() -> None:
    respond = prompt_script(
        {"alpha": [Reply([Text("a0")]), Reply([Text("a1")])], "beta": [Reply([Text("b0")])]},
        summary="S",
        fallback=lambda body: [Text("fallback")],
    )

    def first_text(body: dict[str, Any]) -> str:
        result = respond(body)
        blocks = result.blocks if isinstance(result, Reply) else result
        assert isinstance(blocks[0], Text)
        return blocks[0].text

    user = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x"}]}
    alpha = {"role": "user", "content": "wrapped: alpha!"}
    tool_round = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "B"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
    ]
    assert first_text({"messages": [user, alpha]}) == "a0"
    assert first_text({"messages": [user, alpha, *tool_round]}) == "a1"
    assert first_text({"messages": [alpha, *tool_round, *tool_round]}) == "fallback"
    both = {
        "role": "user",
        "content": [{"type": "text", "text": "alpha"}, {"type": "text", "text": "beta"}],
    }
    assert first_text({"messages": [both]}) == "b0"
    compact = {"role": "user", "content": "Write a detailed summary of the conversation so far."}
    assert first_text({"messages": [alpha, compact]}) == "S"


def test_encoding_short_and_long_paths() -> None:
    assert encode_project_path("/home/user/my_proj.v2") == "-home-user-my-proj-v2"
    assert encode_project_path("/tmp/日本") == "-tmp---"
    assert encode_project_path("/tmp/🎉") == "-tmp---"  # one dash per UTF-16 code unit
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("polygenelubricants") == -(2**31)
    long_path = "/srv/" + "deep_dir." * 30
    encoded = encode_project_path(long_path)
    head, _, suffix = encoded.rpartition("-")
    assert head == long_path.replace("/", "-").replace("_", "-").replace(".", "-")[:200]
    assert int(suffix, 36) == abs(java_string_hash(long_path))
    assert len(encode_project_path("/" + "a" * 199)) == 200  # exactly 200: not cut


@pytest.mark.parametrize(
    "cwd_name",
    [
        pytest.param("project", id="short"),
        pytest.param("long/" + "segment_名前.v1-" * 12 + "/🎉end", id="over-200-chars"),
    ],
)
@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed")
def test_claude_print_writes_where_project_dir_for_says(tmp_path: Path, cwd_name: str) -> None:
    with StandinAPI(prompt_script({"hi": [Reply([Text("hello from the stand-in ✨")])]})) as api:
        env = make_claude_env(tmp_path / "claude", api.url, cwd=tmp_path / cwd_name)
        result = run_print(env, "hi")
        requests = api.requests
    assert result.stdout.strip() == "hello from the stand-in ✨"
    assert result.session_id and result.transcript
    assert (
        result.transcript == project_dir_for(env.config_dir, env.cwd) / f"{result.session_id}.jsonl"
    )
    assert len(os.path.realpath(env.cwd)) < 200 or len(result.transcript.parent.name) > 200
    assert "hello from the stand-in ✨" in result.transcript.read_text()
    # With CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, `claude -p` calls only the Messages API.
    assert {(r.method, r.path.split("?")[0]) for r in requests} == {("POST", "/v1/messages")}
    assert not (env.home / ".claude").exists() or not any((env.home / ".claude").iterdir())


@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed")
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_runner_drives_the_tui_and_cleans_up(tmp_path: Path) -> None:
    script = prompt_script({"ping 乒": [Reply([Text("pong 乓 from the stand-in")])]})
    with StandinAPI(script) as api:
        env = make_claude_env(tmp_path / "claude", api.url)
        with TmuxClaude(env) as tui:
            assert "DO-NOT-CREATE" in tui.session and "DO-NOT-CREATE" in tui.target
            tui.wait_for("❯", timeout=60)
            tui.submit("ping 乒")
            screen = tui.wait_for("pong 乓 from the stand-in", timeout=30)
            socket_path = tui.socket_path
            assert socket_path.exists()
        assert "ping 乒" in screen
    assert not socket_path.exists()
    with pytest.raises(ValueError, match="refusing"):
        tui._tmux("send-keys", "-t", "main:0.0", "x")


@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed")
def test_resume_and_capture_shows_the_active_branch(tmp_path: Path) -> None:
    expected = json.loads((_fixture_dir() / "shape-fork.expected.json").read_text())
    bodies = resume_and_capture(
        _fixture_dir() / "shape-fork.jsonl", expected["session_id"], tmp_path / "cwd", "probe 探"
    )
    assert len(bodies) == 1
    texts = conversation_texts(bodies[0])
    assert texts == [(s["role"], s["text"]) for s in expected["speech"]] + [("user", "probe 探")]
    injected = [t for t in request_texts(bodies[0]) if t.injected]
    assert {t.role for t in injected} == {"user", "system"}  # reminders and system turns exposed
    assert non_text_block_types(bodies[0]) == set()


def _fixture_dir() -> Path:
    dirs = sorted(FIXTURES.glob("claude-code-*"))
    assert dirs, "no fixtures; run tests/fixtures/generate.py"
    return dirs[-1]


def test_committed_fixtures_are_consistent() -> None:
    expected_files = sorted(_fixture_dir().glob("*.expected.json"))
    assert len(expected_files) >= 19
    for path in expected_files:
        expected = json.loads(path.read_text())
        transcript = path.with_name(path.name.replace(".expected.json", ".jsonl"))
        assert transcript.stat().st_size < 1_000_000, transcript.name
        text = transcript.read_text()
        assert {"scenario", "claude_code_version", "speech", "open_tail", "notes"} <= set(expected)
        for item in expected["speech"]:
            assert item["role"] in ("user", "assistant")
            assert item["origin"] in (
                "terminal",
                "channel",
                "queued",
                "speech_tool",
                "compact_summary",
            )
            words = item.get("text", item.get("text_contains"))
            assert words and json.dumps(words, ensure_ascii=False)[1:-1] in text, words
        for line in text.splitlines():
            json.loads(line)
