"""The provider stand-in, and the real Kimi Code CLI against it: what the advisor is sent and
what it prints, the ground the advisor's own tests stand on."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.kimi_env import (
    KimiEnv,
    find_kimi_binary,
    isolated_kimi_env,
    kimi_available,
    pinned_kimi_version,
    run_kimi,
)
from tests.support.standin_openai import (
    MODEL,
    Reply,
    StandinOpenAI,
    ToolCall,
    system_text,
    tool_messages,
    user_prompts,
)

needs_kimi = pytest.mark.skipif(not kimi_available(), reason="Kimi Code CLI not installed "
                                "(run .ci/setup)")


@pytest.fixture
def api() -> Iterator[StandinOpenAI]:
    with StandinOpenAI() as server:
        yield server


@pytest.fixture
def kimi(api: StandinOpenAI) -> Iterator[KimiEnv]:
    with isolated_kimi_env(api.url) as env:
        yield env


def _post(url: str, body: dict[str, Any], timeout: float = 5) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _sse(raw: bytes) -> list[Any]:
    return [line[len("data: "):] if line == "data: [DONE]" else json.loads(line[len("data: "):])
            for line in raw.decode().splitlines() if line.startswith("data: ")]


# ------------------------------------------------------------------------- the stand-in alone


def test_streams_text_and_tool_calls_and_logs_the_body(api: StandinOpenAI) -> None:
    api.queue(Reply("hello " * 20, tool_calls=[ToolCall("Read", {"path": "a.txt"}, id="c1")]))
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": "persona"},
                         {"role": "user", "content": "question"}]}
    status, raw = _post(f"{api.url}/chat/completions", body)
    chunks = _sse(raw)
    assert status == 200 and chunks[-1] == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1] if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "hello " * 20
    calls = [tc for d in deltas for tc in d.get("tool_calls") or []]
    assert calls[0]["id"] == "c1" and calls[0]["function"]["name"] == "Read"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"path": "a.txt"}
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" in chunks[-2]
    assert api.chat_bodies() == [body]
    assert system_text(body) == "persona" and user_prompts(body) == ["question"]


def test_fails_hangs_and_drops_as_scripted(api: StandinOpenAI) -> None:
    api.queue(Reply(http_status=500), Reply(drop_connection=True), Reply(hang=True))
    url, body = f"{api.url}/chat/completions", {"messages": [], "stream": True}
    status, raw = _post(url, body)
    assert status == 500 and "error" in json.loads(raw)
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        _post(url, body)
    started = time.monotonic()
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        _post(url, body, timeout=0.5)
    assert time.monotonic() - started < 3
    assert len(api.chat_bodies()) == 3
    status, raw = _post(url, {"messages": [{"role": "user", "content": "again"}]})
    assert status == 200 and "again" in raw.decode()  # the queue is used up: the echo again


def test_listens_on_loopback_only_and_lists_its_model(api: StandinOpenAI) -> None:
    assert api.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{api.url}/models", timeout=5) as response:
        assert json.load(response)["data"][0]["id"] == MODEL
    assert _post(f"{api.url}/other", {})[0] == 404


# ------------------------------------------------------------------ the real Kimi Code CLI


@needs_kimi
def test_the_pinned_kimi_is_installed(kimi: KimiEnv) -> None:
    out = subprocess.run([str(find_kimi_binary()), "--version"], env=kimi.env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == pinned_kimi_version()


@needs_kimi
def test_kimi_answers_from_the_standin_and_resends_history(api: StandinOpenAI,
                                                           kimi: KimiEnv) -> None:
    api.queue(Reply("first answer"), Reply("second answer"))
    first = run_kimi(kimi, "first question")
    assert first.returncode == 0, first.stderr
    assert first.lines[0] == {"role": "meta", "type": "system.version",
                              "version": pinned_kimi_version()}
    assert first.answer == "first answer"
    session = first.session_id
    assert session and session.startswith("session_")
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"].startswith("Bearer sk-standin")
    body = request.body
    assert body["stream"] is True and body["model"] == MODEL
    assert body["prompt_cache_key"] == session
    assert "Kimi Code" in system_text(body) and user_prompts(body) == ["first question"]

    second = run_kimi(kimi, "second question", session=session)
    assert second.returncode == 0, second.stderr
    assert (second.answer, second.session_id) == ("second answer", session)
    history = api.chat_bodies()[1]["messages"]
    said = [(m["role"], m["content"]) for m in history if m["role"] == "assistant"]
    assert said == [("assistant", "first answer")]
    assert user_prompts(api.chat_bodies()[1]) == ["first question", "second question"]
    assert len(kimi.sessions()) == 1


@needs_kimi
def test_kimi_runs_the_tool_the_standin_asks_for(api: StandinOpenAI, kimi: KimiEnv) -> None:
    """With its default agent, ``kimi -p`` really writes: what the advisor's read-only agent
    must stop."""
    target = kimi.cwd / "written-by-the-model.txt"
    api.queue(Reply("writing", tool_calls=[ToolCall("Write", {"path": str(target),
                                                              "content": "x"})]),
              Reply("written"))
    result = run_kimi(kimi, "write it")
    assert result.returncode == 0, result.stderr
    assert [c["function"]["name"] for c in result.tool_calls] == ["Write"]
    assert target.read_text() == "x"
    [tool] = tool_messages(api.chat_bodies()[1])
    assert tool["tool_call_id"] == result.tool_calls[0]["id"]


@needs_kimi
def test_a_failing_provider_fails_kimi_fast(api: StandinOpenAI, kimi: KimiEnv) -> None:
    api.set_responder(lambda body: Reply(http_status=500))
    started = time.monotonic()
    result = run_kimi(kimi, "anyone there?")
    assert result.returncode == 1
    assert time.monotonic() - started < 30  # max_attempts_per_step = 2, not 10 tries
    assert len(api.chat_bodies()) == 2
    assert [line.get("type") for line in result.lines] == ["system.version",
                                                           "turn.step.retrying"]
    assert "500 stand-in scripted failure" in result.stderr


@needs_kimi
def test_a_dropped_connection_is_retried_by_kimi(api: StandinOpenAI, kimi: KimiEnv) -> None:
    api.queue(Reply(drop_connection=True), Reply("answered on the second try"))
    result = run_kimi(kimi, "are you there?")
    assert result.returncode == 0, result.stderr
    assert result.answer == "answered on the second try"
    [retry] = [line for line in result.lines if line.get("type") == "turn.step.retrying"]
    assert retry["failed_attempt"] == 1
    assert len(api.chat_bodies()) == 2
