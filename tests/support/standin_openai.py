"""A loopback stand-in for an OpenAI-style chat API: the advisor's provider, for Kimi Code.

The twin of :mod:`tests.support.standin_api` (Anthropic's Messages API for Claude Code). It listens
on 127.0.0.1 (a free port), answers ``POST /v1/chat/completions`` (SSE chunks when ``stream`` is
true, one JSON object otherwise) and ``GET /v1/models``, and records every request: the ground
truth of what the advisor was sent (system prompt, history, tool results). Any other path gets a
404 error body at once, so nothing hangs.

Kimi Code 2.1.0 with ``type = "openai"`` calls ``<base_url>/chat/completions`` (the base URL ends
in ``/v1``) and nothing else when its telemetry and model catalogue refresh are off.

Behaviours come from a queue (one :class:`Reply` per chat request, in order), then from a
fallback responder (an echo by default)::

    with StandinOpenAI() as api:
        api.queue(Reply(tool_calls=[ToolCall("Write", {"path": "x", "content": "y"})]),
                  Reply("I could not write."))
        ...  # run kimi with base_url = api.url
        bodies = api.chat_bodies()

A reply can answer with text, ask for tool calls, hang (no byte until the server stops or
``release()``), fail with an HTTP status, or close the connection without an answer.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

from .loopback import LoopbackHandler, LoopbackServer

__all__ = [
    "MODEL",
    "RecordedRequest",
    "Reply",
    "Responder",
    "StandinOpenAI",
    "ToolCall",
    "default_responder",
    "last_user_text",
    "message_texts",
    "sse_chunks",
    "system_text",
    "tool_messages",
    "user_prompts",
]

MODEL = "standin-advisor-1"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one chat request.

    ``delay`` seconds pass before anything is sent. ``hang`` sends nothing at all until the
    stand-in is stopped or released. ``http_status`` other than 200 answers with an OpenAI error
    body of that status; ``drop_connection`` closes the socket without an answer.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()
    delay: float = 0.0
    hang: bool = False
    http_status: int = 200
    drop_connection: bool = False

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON body, or None when there was none / it did not parse
    received_at: float


# ------------------------------------------------------------------------- request inspection


def _content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if isinstance(m, dict)]


def message_texts(body: dict[str, Any], role: str) -> list[str]:
    """The texts of every message of ROLE (``system``, ``user``, ``assistant``, ``tool``)."""
    return [_content_text(m.get("content")) for m in _messages(body) if m.get("role") == role]


def system_text(body: dict[str, Any]) -> str:
    """Every system message joined: the advisor agent's body is in there."""
    return "\n".join(message_texts(body, "system"))


REMINDER = "<system-reminder>"


def user_prompts(body: dict[str, Any]) -> list[str]:
    """The user messages that are prompts: Kimi Code adds ``<system-reminder>`` user messages
    (date, permission mode) after each prompt; those are left out."""
    return [t for t in message_texts(body, "user") if not t.lstrip().startswith(REMINDER)]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last prompt (see :func:`user_prompts`)."""
    prompts = user_prompts(body)
    return prompts[-1] if prompts else ""


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool`` messages after the last assistant message (the results of its calls)."""
    out: list[dict[str, Any]] = []
    for message in reversed(_messages(body)):
        if message.get("role") == "tool":
            out.append(message)
        elif message.get("role") == "assistant":
            break
    return list(reversed(out))


_counter = itertools.count(1)


def default_responder(body: dict[str, Any]) -> Reply:
    """Echo-style answer: names how many messages it saw and the last user words."""
    n = next(_counter)
    lines = last_user_text(body).strip().splitlines()
    tail = lines[-1][:80] if lines else ""
    return Reply(f"stand-in advisor reply #{n} (saw {len(_messages(body))} messages): {tail}")


# -------------------------------------------------------------------------------- wire format


def _chunks(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any]) -> dict[str, int]:
    prompt = max(1, len(json.dumps(body.get("messages") or [])) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}


def sse_chunks(reply: Reply, model: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one streamed answer (without ``[DONE]``)."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _chunks(reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        yield chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in _chunks(json.dumps(call.arguments, ensure_ascii=False)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(body)}


def _completion_json(reply: Reply, model: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in reply.tool_calls]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": _usage(body)}


def _error(message: str, kind: str = "api_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# ------------------------------------------------------------------------------------- server


class _Handler(LoopbackHandler):
    def _record(self, body: Any) -> None:
        self.server.api._record(self.command, self.path, dict(self.headers.items()), body)

    def do_GET(self) -> None:
        self._record(None)
        if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "stand-in"}]})
        else:
            self._send_json(404, _error("stand-in: no such path", "not_found_error"))

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        api = self.server.api
        if not self.path.split("?", 1)[0].endswith("/chat/completions") \
                or not isinstance(body, dict):
            self._send_json(404, _error("stand-in: no such path", "not_found_error"))
            return
        try:
            reply = api._reply_for(body)
        except Exception as exc:  # a broken responder must fail the test, not hang the CLI
            api._errors.append(exc)
            self._send_json(400, _error(f"stand-in responder failed: {exc!r}",
                                        "invalid_request_error"))
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.hang:
            api._released.wait()
            self.close_connection = True
            return
        if reply.drop_connection:
            self.close_connection = True
            self.connection.close()
            return
        if reply.http_status != 200:
            self._send_json(reply.http_status, _error("stand-in scripted failure"))
            return
        model = str(body.get("model") or MODEL)
        if not body.get("stream"):
            self._send_json(200, _completion_json(reply, model, body))
            return
        stream = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n"
                         for c in sse_chunks(reply, model, body)) + "data: [DONE]\n\n"
        self._send_stream(stream.encode())


class StandinOpenAI(LoopbackServer):
    """The stand-in server; a context manager. ``url`` is the provider's ``base_url`` (``…/v1``)."""

    handler = _Handler
    thread_name = "standin-openai"

    def __init__(self, responder: Responder | None = None, port: int = 0) -> None:
        super().__init__(port)
        self._fallback: Responder = responder or default_responder
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._released = threading.Event()

    def start(self) -> Self:
        self._released.clear()
        return super().start()

    def _stopping(self) -> None:
        self._released.set()  # hanging requests end, so shutdown does not wait for them

    @property
    def url(self) -> str:
        """The ``base_url`` of the provider: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.origin}/v1"

    # behaviours
    def queue(self, *replies: Reply) -> None:
        """Answers the next chat requests with REPLIES, in order, then the fallback again."""
        with self._lock:
            self._queue.extend(replies)

    def set_responder(self, responder: Responder) -> None:
        """The fallback for requests the queue has no reply for."""
        with self._lock:
            self._fallback = responder

    def release(self) -> None:
        """Ends every hanging request (their connection closes without an answer)."""
        self._released.set()

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder = self._fallback
        return responder(body)

    # recording
    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(method, path, headers, body, time.time()))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def chat_bodies(self) -> list[dict[str, Any]]:
        """The bodies of every ``POST …/chat/completions``, in arrival order."""
        return [r.body for r in self.requests
                if r.method == "POST" and r.path.split("?", 1)[0].endswith("/chat/completions")
                and isinstance(r.body, dict)]

    def wait_for_chats(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The chat bodies once at least COUNT arrived (TimeoutError after TIMEOUT seconds)."""
        deadline = time.monotonic() + timeout
        while len(bodies := self.chat_bodies()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(bodies)} chat requests within {timeout:g} s, "
                                   f"wanted {count}")
            time.sleep(0.05)
        return bodies

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder (each answered with HTTP 400)."""
        return list(self._errors)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._queue.clear()
