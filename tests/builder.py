"""Build transcripts in Claude Code 2.1.328's shapes (facts §2-§3) for unit and property tests.

Records chain the way the real client chains them: one assistant record per content block
sharing `message.id`, each tool result hanging off its own tool_use record, attachments inside
the chain. The builder also keeps the expected speech, written from what the test said, never
from reading the file back.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kael_thread_rebuild.transcript.reader import dumps_line

SESSION = "5e55a1d0-0000-4000-8000-000000000001"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()


@dataclass
class TranscriptBuilder:
    session_id: str = SESSION
    cwd: str = "/home/user/project"
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 1, 8, 0, tzinfo=UTC))
    records: list[dict[str, Any]] = field(default_factory=list)
    expected: list[tuple[str, str]] = field(default_factory=list)
    parent: str | None = None
    _tick: int = 0
    _counter: int = 0

    def _id(self) -> str:
        self._counter += 1
        return str(uuid.UUID(int=(0xABC << 100) + self._counter))

    def _time(self) -> str:
        self._tick += 1
        moment = self.start + timedelta(seconds=self._tick)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _envelope(self, kind: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
        record = {
            "parentUuid": self.parent if parent is None else parent,
            "isSidechain": False, "type": kind, "uuid": self._id(), "timestamp": self._time(),
            "userType": "external", "entrypoint": "cli", "cwd": self.cwd,
            "sessionId": self.session_id, "version": "2.1.328", "gitBranch": "HEAD",
        }
        record.update(extra)
        return record

    def add(self, record: dict[str, Any], link: bool = True) -> dict[str, Any]:
        self.records.append(record)
        if link and "uuid" in record:
            self.parent = record["uuid"]
        return record

    def bookkeeping(self, kind: str = "cost-state", **fields: Any) -> None:
        self.add({"type": kind, "sessionId": self.session_id, **fields}, link=False)

    def user(self, text: str, *, expect: bool = True, **extra: Any) -> dict[str, Any]:
        self.bookkeeping("queue-operation", operation="enqueue", content=text)
        self.bookkeeping("queue-operation", operation="dequeue")
        record = self.add(self._envelope("user", message={"role": "user", "content": text},
                                         **extra))
        if expect:
            self.expected.append(("user", text))
        return record

    def meta_user(self, text: str, *, expect: bool = False) -> dict[str, Any]:
        record = self.add(self._envelope("user", isMeta=True,
                                         message={"role": "user", "content": text}))
        if expect:
            self.expected.append(("user", text))
        return record

    def attachment(self, kind: str, rendered: str | None = None,
                   role: str = "system") -> dict[str, Any]:
        extra: dict[str, Any] = {"attachment": {"type": kind}}
        if rendered is not None:
            extra["rendered"] = [{"content": rendered}]
            extra["renderedRole"] = role
        return self.add(self._envelope("attachment", **extra))

    def first_turn_attachments(self) -> None:
        self.attachment("environment", "<system-reminder>\n# Environment\n</system-reminder>")
        self.attachment("skill_listing", "<system-reminder>skills: a, b</system-reminder>")
        self.attachment("session_context")
        self.attachment("prompt_snapshot")

    def assistant(self, *blocks: dict[str, Any], model: str = "claude-opus-5-5",
                  **extra: Any) -> list[dict[str, Any]]:
        message_id = "msg_" + uuid.uuid4().hex[:20]
        made = []
        for index, block in enumerate(blocks):
            record = self._envelope(
                "assistant", apiBlockIndex=index,
                message={"id": message_id, "type": "message", "role": "assistant",
                         "model": model, "content": [block], "stop_reason": "end_turn"},
                **extra)
            made.append(self.add(record))
            if block["type"] == "text" and model != "<synthetic>" and not extra:
                self.expected.append(("assistant", block["text"]))
        return made

    def say(self, text: str) -> list[dict[str, Any]]:
        return self.assistant({"type": "text", "text": text})

    def tool_call(self, name: str, output: str, *, text: str | None = None,
                  arguments: dict[str, Any] | None = None) -> None:
        """An assistant message (optional text, one tool_use) and its result."""
        tool_id = "toolu_" + uuid.uuid4().hex[:16]
        blocks: list[dict[str, Any]] = []
        if text is not None:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "id": tool_id, "name": name,
                       "input": arguments or {"command": "echo"}})
        made = self.assistant(*blocks)
        self.add(self._envelope(
            "user", parent=made[-1]["uuid"], sourceToolAssistantUUID=made[-1]["uuid"],
            toolUseResult={"stdout": output},
            message={"role": "user", "content": [
                {"tool_use_id": tool_id, "type": "tool_result", "content": output}]}))

    def parallel_tools(self, outputs: list[str], text: str | None = None) -> None:
        ids = ["toolu_" + uuid.uuid4().hex[:16] for _ in outputs]
        blocks: list[dict[str, Any]] = [] if text is None else [{"type": "text", "text": text}]
        blocks += [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"c": "x"}}
                   for tool_id in ids]
        made = self.assistant(*blocks)
        tool_records = made[-len(outputs):]
        # Results finish in reverse order: only the last one is an ancestor of what follows.
        for record, tool_id, output in reversed(list(zip(tool_records, ids, outputs,
                                                         strict=True))):
            self.add(self._envelope(
                "user", parent=record["uuid"],
                message={"role": "user", "content": [
                    {"tool_use_id": tool_id, "type": "tool_result", "content": output}]}))

    def thinking(self, text: str = "private chain of thought") -> None:
        self.assistant({"type": "thinking", "thinking": text, "signature": "c2ln"})

    def speech_tool(self, text: str, name: str = "mcp__companion__reply") -> None:
        tool_id = "toolu_" + uuid.uuid4().hex[:16]
        made = self.assistant({"type": "tool_use", "id": tool_id, "name": name,
                               "input": {"chat_id": "1", "text": text}})
        self.expected.append(("assistant", text))
        self.add(self._envelope(
            "user", parent=made[-1]["uuid"],
            message={"role": "user", "content": [
                {"tool_use_id": tool_id, "type": "tool_result", "content": "sent"}]}))

    def image(self, text: str) -> None:
        self.bookkeeping("queue-operation", operation="enqueue", content=text)
        self.add(self._envelope("user", message={"role": "user", "content": [
            {"type": "text", "text": text},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]}))
        self.expected.append(("user", text))
        self.meta_user("[Image: source: /tmp/claude-0/x/images/1.png]")

    def system(self, subtype: str = "stop_hook_summary") -> None:
        self.add(self._envelope("system", subtype=subtype, content=""))

    def write(self, path: Path) -> Path:
        # A lone surrogate is written as Node writes it: an escape (`"\\udcff"`).
        path.write_bytes(b"".join(dumps_line(record) + b"\n" for record in self.records))
        return path
