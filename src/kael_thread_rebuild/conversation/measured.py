"""Which parts of a record are only measured, never read as words.

The reader leaves long strings undecoded (`transcript.skeleton.BigText`): those of a long line,
and with the compiled engine every string value of `reader.SKIP_LEAST` bytes or more (see
`reader.engine`). Before such a record is classified (`read_records`' SETTLE), every long
string the classifier reads as text (speech, ids, types, start-up context) is decoded; those
it only measures stay as they are: tool results, tool inputs (except a speech tool's),
thinking, images, and every field it never looks at (`toolUseResult`, an attachment's payload,
a system record's content).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..claude_code.record_shapes import (
    IMAGE_BLOCK,
    THINKING_BLOCKS,
    TOOL_RESULT_BLOCK,
    TOOL_USE_BLOCK,
)
from ..transcript.skeleton import materialize

# Fields of a record the classifier reads as text; "message" and "attachment" are sorted below.
_READ = frozenset({
    "type", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "kaelRebuild",
    "sessionId", "timestamp", "version", "cwd", "subtype", "isCompactSummary", "isMeta",
    "promptSource", "rendered", "isApiErrorMessage",
})
_ATTACHMENT_READ = ("type", "prompt", "commandMode")
# Per content block type: the fields only measured.
_MEASURED = {
    TOOL_RESULT_BLOCK: frozenset({"content"}),
    **{thinking: frozenset({"thinking", "signature", "data"}) for thinking in THINKING_BLOCKS},
    IMAGE_BLOCK: frozenset({"source"}),
    TOOL_USE_BLOCK: frozenset({"input"}),
}


def settle(record: dict[str, Any], speech_tool: Callable[[str], bool]) -> None:
    """Decode, in place, the long strings of RECORD that classifying it reads as text."""
    for key, value in record.items():
        if key == "message" and type(value) is dict:
            _settle_message(value, speech_tool)
        elif key == "attachment" and type(value) is dict:
            for name in _ATTACHMENT_READ:
                if name in value:
                    value[name] = materialize(value[name])
        elif key in _READ:
            record[key] = materialize(value)


def _settle_message(message: dict[str, Any], speech_tool: Callable[[str], bool]) -> None:
    for key, value in message.items():
        if key == "content" and type(value) is list:
            for block in value:
                if type(block) is dict:
                    _settle_block(block, speech_tool)
        else:
            message[key] = materialize(value)


def _settle_block(block: dict[str, Any], speech_tool: Callable[[str], bool]) -> None:
    kind, name = materialize(block.get("type")), materialize(block.get("name"))
    measured = _MEASURED.get(kind, frozenset()) if isinstance(kind, str) else frozenset()
    if kind == TOOL_USE_BLOCK and isinstance(name, str) and speech_tool(name):
        measured = frozenset()
    for key, value in block.items():
        if key not in measured:
            block[key] = materialize(value)  # "type" and "name" decoded again: rare, small
