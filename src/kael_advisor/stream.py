"""The Kimi Code CLI's `--output-format stream-json` lines, read one at a time: assistant text
is the answer, tool calls are summarised, retries are counted, the `session.resume_hint` line
names the session the run created or continued. Lines of other shapes are skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

MAX_ARGUMENT_SHOWN = 80


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Function(_Line):
    name: str = "?"
    arguments: str = ""


class ToolCall(_Line):
    id: str = ""
    function: Function = Function()


class Assistant(_Line):
    role: Literal["assistant"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] = []

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(part.get("text", "")) for part in self.content
                           if part.get("type") == "text")
        return self.content or ""


class ToolResult(_Line):
    role: Literal["tool"]
    tool_call_id: str = ""
    content: str | list[dict[str, Any]] | None = None


class Meta(_Line):
    role: Literal["meta"]
    type: str = ""
    session_id: str | None = None
    message: str | None = None


_ANY_LINE: TypeAdapter[Assistant | ToolResult | Meta] = TypeAdapter(Assistant | ToolResult | Meta)


def summarise_call(call: ToolCall) -> str:
    """`Name(first argument)`, shortened: what the advisor did, not what it read."""
    try:
        arguments = json.loads(call.function.arguments or "{}")
    except ValueError:
        arguments = {}
    shown = next((str(value) for value in arguments.values()), "") \
        if isinstance(arguments, dict) else ""
    if len(shown) > MAX_ARGUMENT_SHOWN:
        shown = shown[:MAX_ARGUMENT_SHOWN - 1] + "…"
    return f"{call.function.name}({shown})"


@dataclass
class Transcript:
    """What one run said so far."""

    texts: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    failed_tools: int = 0
    retries: int = 0
    session_id: str | None = None
    lines: int = 0
    spoke: bool = False  # an assistant or tool line came (meta lines do not count)

    @property
    def answer(self) -> str:
        return "\n\n".join(text for text in self.texts if text.strip())

    def feed(self, raw: bytes | str) -> None:
        """Take one stdout line."""
        self.lines += 1
        try:
            line = _ANY_LINE.validate_json(raw)
        except ValidationError:
            return
        if not isinstance(line, Meta):
            self.spoke = True
        if isinstance(line, Assistant):
            self.texts.append(line.text())
            self.tools.extend(summarise_call(call) for call in line.tool_calls)
        elif isinstance(line, Meta):
            if line.type == "session.resume_hint" and line.session_id:
                self.session_id = line.session_id
            elif line.type == "turn.step.retrying":
                self.retries += 1
        elif isinstance(line.content, str) and line.content.startswith("Tool \"") \
                and "not found" in line.content:
            self.failed_tools += 1
