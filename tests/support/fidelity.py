"""Fidelity checks against the real binary: resume a candidate session and read what the model saw.

``resume_and_capture`` puts a candidate transcript where Claude Code looks for it (a fresh isolated
config dir), runs ``claude -p --resume <id> <prompt>`` against a fresh stand-in API and returns
every Messages API request body. The helpers below read those bodies.

What Claude Code 2.1.328 adds on resume (so tests know what to skip):

- ``{"role": "system", ...}`` messages: the per-turn effort statement after the first user message
  (``content: []``) and the re-emitted context (environment, model, tools, skills, date) after the
  new prompt;
- ``<system-reminder>`` text blocks prepended to the new user message (git attribution; CLAUDE.md
  when the cwd has one);
- consecutive user records are merged into one message, every non-final text block getting
  ``"\\n"`` appended;
- a trailing user record gets a synthetic ``"No response requested."`` assistant reply.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .claude_env import make_claude_env, run_print
from .standin_api import Responder, StandinAPI, is_subagent_request

__all__ = [
    "RequestText",
    "conversation_texts",
    "is_subagent_request",
    "main_requests",
    "non_text_block_types",
    "non_text_blocks",
    "request_texts",
    "resume_and_capture",
]

INJECTED_PREFIX = "<system-reminder>"


def resume_and_capture(
    candidate_jsonl: Path,
    session_id: str,
    cwd: Path,
    prompt: str,
    *,
    responder: Responder | None = None,
    timeout: float = 120,
) -> list[dict[str, Any]]:
    """Resume ``candidate_jsonl`` as ``session_id`` in ``cwd`` with one new prompt.

    The file is copied to ``<fresh config>/projects/<enc(realpath(cwd))>/<session_id>.jsonl``;
    ``cwd`` is created if missing and marked trusted. Raises ``RuntimeError`` when ``claude``
    exits non-zero (e.g. "No conversation found"). Returns the ``POST /v1/messages`` bodies in
    arrival order (normally one; more when the reply uses tools or subagents).
    """
    root = Path(tempfile.mkdtemp(prefix="kael-fidelity-"))
    try:
        with StandinAPI(responder) as api:
            env = make_claude_env(root, api.url, cwd=Path(cwd))
            env.project_dir.mkdir(parents=True, exist_ok=True)
            target = env.session_path(session_id)
            shutil.copyfile(candidate_jsonl, target)
            target.chmod(0o600)
            run_print(env, prompt, resume=session_id, timeout=timeout)
            return api.message_bodies()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class RequestText:
    """One text block of a request's ``messages``.

    ``injected`` is true for every text of a ``system`` message and for user text blocks that
    start with ``<system-reminder>`` (what Claude Code adds itself, not conversation).
    """

    index: int  # position of the message in body["messages"]
    role: str  # "user" | "assistant" | "system"
    text: str
    injected: bool


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def request_texts(body: dict[str, Any]) -> list[RequestText]:
    """Every text block of every message, in order, with the injected ones marked."""
    out: list[RequestText] = []
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            continue
        role = str(message.get("role"))
        for block in _blocks(message.get("content")):
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                continue
            text: str = block["text"]
            injected = role == "system" or text.lstrip().startswith(INJECTED_PREFIX)
            out.append(RequestText(index, role, text, injected))
    return out


def conversation_texts(
    body: dict[str, Any], *, include_injected: bool = False
) -> list[tuple[str, str]]:
    """Ordered ``(role, text)`` of the user/assistant text blocks (injected ones skipped unless
    ``include_injected``; ``system`` messages are only listed with ``include_injected``)."""
    return [(t.role, t.text) for t in request_texts(body) if include_injected or not t.injected]


def non_text_blocks(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """``(message index, role, block type)`` of every block that is not ``text``."""
    out: list[tuple[int, str, str]] = []
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            continue
        for block in _blocks(message.get("content")):
            kind = str(block.get("type"))
            if kind != "text":
                out.append((index, str(message.get("role")), kind))
    return out


def non_text_block_types(body: dict[str, Any]) -> set[str]:
    """The set of non-text block types in the messages: tool_use, tool_result, thinking, …"""
    return {kind for _, _, kind in non_text_blocks(body)}


def main_requests(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The main-thread requests (subagent requests dropped), in order."""
    return [b for b in bodies if not is_subagent_request(b)]


def tiny_png(width: int = 16, height: int = 16, rgb: tuple[int, int, int] = (220, 20, 60)) -> bytes:
    """A PNG of one colour, made with the standard library (the fixtures and the demo's image)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
