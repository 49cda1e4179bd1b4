"""The shapes of the records Claude Code writes to a transcript: their types, block types, the
attachments and system subtypes it regenerates or shows, and which shapes it never writes.

Pure knowledge (standard library only, no reading): what a record means for a rebuild is
decided in `conversation.records`, which reads these names from here.
"""

from __future__ import annotations

from typing import Any

# Top-level record types (the record's `type`).
USER = "user"
ASSISTANT = "assistant"
ATTACHMENT = "attachment"
SYSTEM = "system"
# The records that carry a `message` (speech, tool calls and their results).
SPEECH_TYPES = frozenset({USER, ASSISTANT})

# Content block types (a block's `type` inside `message.content`).
TEXT_BLOCK = "text"
TOOL_USE_BLOCK = "tool_use"
TOOL_RESULT_BLOCK = "tool_result"
IMAGE_BLOCK = "image"
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# The model name of a message Claude Code made up itself (never the model speaking).
SYNTHETIC_MODEL = "<synthetic>"
# The system subtype of a compaction boundary (its `logicalParentUuid` crosses it).
COMPACT_BOUNDARY = "compact_boundary"
# The attachment of a prompt typed while the model was busy (`attachment.prompt`).
QUEUED_COMMAND = "queued_command"
# `promptSource` of a user record sent from the queue.
QUEUED_PROMPT = "queued"

# Attachments Claude Code regenerates on resume: never part of the frozen startup snapshot.
REGENERATED_ATTACHMENTS = frozenset({
    "environment", "model", "deferred_tools_delta", "agent_listing_delta", "skill_listing",
    "session_context", "date", "remote_session_change", "prompt_snapshot", "auto_mode",
    "mcp_instructions_delta", "plan_mode", "todo_reminder", "output_style", "token_usage",
    "budget_usd", "critical_system_reminder",
})
# System subtypes whose content Claude Code may show to the model; the rest is bookkeeping.
SPOKEN_SYSTEM_SUBTYPES = frozenset({"local_command", "informational", "api_error"})


def is_speech_type(record_type: object) -> bool:
    """Whether a record's `type` is one that carries a message (any JSON value may come)."""
    return isinstance(record_type, str) and record_type in SPEECH_TYPES


def user_text(content: Any) -> str:
    """A user message's text: the string content, or its text blocks joined by a newline."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block[TEXT_BLOCK] for block in content
            if isinstance(block, dict) and block.get("type") == TEXT_BLOCK
            and isinstance(block.get(TEXT_BLOCK), str)
        )
    return ""


def impossible_shape(record: dict[str, Any]) -> str | None:
    """What makes a user or assistant record something Claude Code cannot have written (its
    words could be lost without a trace), or None when its shape is possible."""
    if not is_speech_type(record.get("type")):
        return None
    if not isinstance(record.get("uuid"), str):
        return "no uuid"
    parent = record.get("parentUuid")
    if parent is not None and not isinstance(parent, str):
        return "parentUuid is not a string"
    message = record.get("message")
    if not isinstance(message, dict):
        return "message is not an object"
    return _impossible_content(message.get("content"))


def _impossible_content(content: Any) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "content is neither a string nor a list of blocks"
    for block in content:
        if not isinstance(block, dict):
            return "a content block is not an object"
        if block.get("type") == TEXT_BLOCK and not isinstance(block.get(TEXT_BLOCK), str):
            return "a text block has no text"
    return None
