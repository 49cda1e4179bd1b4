"""A loopback stand-in for Anthropic's Messages API, for running the real Claude Code binary.

It listens on 127.0.0.1 (a free port), answers ``POST /v1/messages`` (SSE when ``stream`` is true,
JSON otherwise) and ``POST /v1/messages/count_tokens``, and records every request body: the ground
truth of what the model was shown. With ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` Claude Code
2.1.328 calls nothing else at start-up (measured, ``-p`` and interactive); ``GET /v1/models`` and
``HEAD`` are answered anyway, any other path gets a 404 error body at once, so nothing hangs.

Replies are scripted by a responder, ``responder(request_body) -> Reply | list[Block]``::

    def responder(body: dict[str, Any]) -> Reply:
        if last_tool_results(body):
            return Reply([Text("done")])
        return Reply([Text("running it"), ToolUse("Bash", {"command": "echo hi"})])

    with StandinAPI(responder) as api:
        ...  # run claude with ANTHROPIC_BASE_URL=api.url
        bodies = api.message_bodies()
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .loopback import LoopbackHandler, LoopbackServer

__all__ = [
    "Block",
    "RecordedRequest",
    "RedactedThinking",
    "Reply",
    "Responder",
    "StandinAPI",
    "Text",
    "Thinking",
    "ToolUse",
    "default_responder",
    "is_compaction_request",
    "is_subagent_request",
    "last_tool_results",
    "last_user_text",
    "prompt_script",
    "sse_events",
    "tool_result_text",
]

MODEL = "claude-opus-5-5"


# --------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Thinking:
    thinking: str
    signature: str = "c3RhbmQtaW4gc2lnbmF0dXJl"


@dataclass(frozen=True)
class RedactedThinking:
    data: str = "c3RhbmQtaW4gcmVkYWN0ZWQgdGhpbmtpbmc="


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_{uuid.uuid4().hex[:24]}")


Block = Text | Thinking | RedactedThinking | ToolUse

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``stop_reason`` defaults to ``tool_use`` when a block is a :class:`ToolUse`, else ``end_turn``.
    ``delay`` seconds pass before the answer is sent (to keep the session busy). ``http_status``
    other than 200 answers with an API error of that status instead; ``drop_connection`` closes
    the socket without any answer.
    """

    blocks: list[Block]
    stop_reason: StopReason | None = None
    delay: float = 0.0
    http_status: int = 200
    drop_connection: bool = False

    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


Responder = Callable[[dict[str, Any]], "Reply | list[Block]"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON body, or None when there was none / it did not parse
    received_at: float


# ------------------------------------------------------------------------- request inspection


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _last_user_message(body: dict[str, Any]) -> dict[str, Any] | None:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


def last_user_text(body: dict[str, Any]) -> str:
    """Text blocks of the last user message joined by newlines (system reminders included)."""
    message = _last_user_message(body)
    if message is None:
        return ""
    texts = [b.get("text", "") for b in _blocks(message.get("content")) if b.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str))


def last_tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the last user message (empty for a fresh prompt)."""
    message = _last_user_message(body)
    if message is None:
        return []
    return [b for b in _blocks(message.get("content")) if b.get("type") == "tool_result"]


def tool_result_text(block: Mapping[str, Any]) -> str:
    """A ``tool_result`` block's text; Claude Code hands a tool's structured ``{"result": text}``
    on as that JSON, which gives the text inside."""
    inner = block.get("content")
    text = inner if isinstance(inner, str) else "".join(
        str(p.get("text", "")) for p in inner or [] if isinstance(p, dict))
    try:
        structured = json.loads(text)
    except ValueError:
        return text
    result = structured.get("result") if isinstance(structured, dict) else None
    return result if isinstance(result, str) else text


def is_compaction_request(body: dict[str, Any]) -> bool:
    """True for Claude Code's summarisation request (``/compact``)."""
    text = last_user_text(body)
    return "summary" in text.lower() and (
        "conversation so far" in text.lower() or "detailed summary" in text.lower()
    )


def is_subagent_request(body: dict[str, Any]) -> bool:
    """Subagent requests carry ``cc_is_subagent=true`` in the billing-header system block."""
    return any("cc_is_subagent=true" in str(b.get("text", "")) for b in _blocks(body.get("system")))


def _user_texts(message: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for b in _blocks(message.get("content"))
        if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def prompt_script(
    script: Mapping[str, Sequence[Reply | list[Block]]],
    *,
    summary: str | None = None,
    fallback: Responder | None = None,
) -> Responder:
    """A stateless responder scripted per prompt.

    For each request it finds the newest user message containing one of the script's prompts
    (the prompt text appearing inside a text block, so Claude Code's wrappers do not matter;
    when several match, the one appearing last wins), counts the assistant messages after it
    (0 for the first call, 1 after the first tool_result round, …) and returns that reply.
    Subagent requests are matched the same way (their first user message holds the Agent
    prompt). A compaction request gets ``summary``; anything unmatched goes to ``fallback``
    (``default_responder``).
    """
    fallback = fallback or default_responder

    def respond(body: dict[str, Any]) -> Reply | list[Block]:
        if summary is not None and is_compaction_request(body):
            return Reply([Text(summary)])
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") != "user":
                continue
            best: tuple[int, int, str] | None = None
            for block_no, text in enumerate(_user_texts(message)):
                for prompt in script:
                    at = text.rfind(prompt)
                    if at >= 0 and (best is None or (block_no, at) > best[:2]):
                        best = (block_no, at, prompt)
            if best is None:
                continue
            step = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
            replies = script[best[2]]
            if step < len(replies):
                return replies[step]
            break
        return fallback(body)

    return respond


_counter = itertools.count(1)


def default_responder(body: dict[str, Any]) -> Reply:
    """Echo-style answer: names how many messages it saw and the last user words."""
    n = next(_counter)
    if is_compaction_request(body):
        return Reply([Text(f"<summary>stand-in summary #{n}</summary>")])
    last = last_user_text(body).strip().splitlines()
    tail = last[-1][:80] if last else ""
    count = len(body.get("messages") or [])
    return Reply([Text(f"stand-in reply #{n} (saw {count} messages): {tail}")])


# -------------------------------------------------------------------------------- wire format


def _usage(output_tokens: int = 5) -> dict[str, Any]:
    return {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Thinking):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinking):
        return {"type": "redacted_thinking", "data": block.data}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


def _chunks(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse_events(reply: Reply, model: str, message_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of one streamed message."""
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(1),
            },
        },
    )
    for index, block in enumerate(reply.blocks):
        start: dict[str, Any]
        deltas: list[dict[str, Any]] = []
        if isinstance(block, Text):
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block.text)]
        elif isinstance(block, Thinking):
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block.thinking)]
            deltas.append({"type": "signature_delta", "signature": block.signature})
        elif isinstance(block, RedactedThinking):
            start = {"type": "redacted_thinking", "data": block.data}
        else:
            start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            payload = json.dumps(block.input, ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(payload)]
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": start,
            },
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": delta,
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.effective_stop_reason(), "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _message_json(reply: Reply, model: str, message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(b) for b in reply.blocks],
        "stop_reason": reply.effective_stop_reason(),
        "stop_sequence": None,
        "usage": _usage(),
    }


# ------------------------------------------------------------------------------------- server


class _Handler(LoopbackHandler):
    def extra_headers(self) -> dict[str, str]:
        return {"request-id": f"req_{uuid.uuid4().hex[:20]}"}

    def do_GET(self) -> None:
        self.server.api._record("GET", self.path, None)
        path = self.path.split("?", 1)[0]
        if path.startswith("/v1/models"):
            self._send_json(200, {"data": [{"id": MODEL, "type": "model"}], "has_more": False})
        else:
            self._send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}}
            )

    def do_HEAD(self) -> None:
        self.server.api._record("HEAD", self.path, None)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self._read_body()
        api = self.server.api
        api._record("POST", self.path, body)
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages/count_tokens":
            size = len(json.dumps(body)) if body is not None else 0
            self._send_json(200, {"input_tokens": max(1, size // 4)})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}}
            )
            return
        try:
            reply = api._reply_for(body)
        except Exception as exc:  # a broken responder must fail the test, not hang claude
            api._errors.append(exc)
            self._send_json(
                400,
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"stand-in responder failed: {exc!r}",
                    },
                },
            )
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop_connection:
            self.close_connection = True
            self.connection.close()
            return
        if reply.http_status != 200:
            self._send_json(
                reply.http_status,
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": "stand-in scripted failure"},
                },
            )
            return
        model = str(body.get("model") or MODEL)
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        if not body.get("stream"):
            self._send_json(200, _message_json(reply, model, message_id))
            return
        stream = "".join(
            f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            for name, data in sse_events(reply, model, message_id)
        ).encode()
        self._send_stream(stream)


class StandinAPI(LoopbackServer):
    """The stand-in server. Use as a context manager; ``url`` is the ``ANTHROPIC_BASE_URL``."""

    handler = _Handler
    thread_name = "standin-api"

    def __init__(self, responder: Responder | None = None, port: int = 0) -> None:
        super().__init__(port)
        self._responder: Responder = responder or default_responder
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []

    @property
    def url(self) -> str:
        return self.origin

    def set_responder(self, responder: Responder) -> None:
        with self._lock:
            self._responder = responder

    # recording
    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(method, path, body, time.time()))

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            responder = self._responder
        result = responder(body)
        return result if isinstance(result, Reply) else Reply(list(result))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def message_bodies(self) -> list[dict[str, Any]]:
        """The bodies of every ``POST /v1/messages`` (not count_tokens), in arrival order."""
        return [
            r.body
            for r in self.requests
            if r.method == "POST"
            and r.path.split("?", 1)[0] == "/v1/messages"
            and isinstance(r.body, dict)
        ]

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder (each answered with HTTP 400)."""
        return list(self._errors)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
