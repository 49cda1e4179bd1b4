"""Blocks that Claude Code or its plugins inject into user text; they are runtime, not speech."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..transcript.reader import text_bytes

INJECTED_TAGS = (
    "system-reminder",
    "local-command-caveat",
    "local-command-stdout",
    "local-command-stderr",
    "command-name",
    "command-message",
    "command-args",
    "bash-input",
    "bash-stdout",
    "bash-stderr",
    "memory-retrieval",
    "heartbeat",
    "scheduled-task",
    "task-notification",
    "ide_selection",
    "ide-selection",
)

_TAGS = "|".join(re.escape(tag) for tag in INJECTED_TAGS)
# A whole block; the closing tag must match the opening one.
_BLOCK = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>.*?</\1>", re.DOTALL)
# Where a block at the end may start: at the start of a line (after spaces at most).
_LINE_START_TAG = re.compile(rf"^[ \t]*(<)(?:{_TAGS})[\s>]", re.MULTILINE)
_LINE_END = re.compile(r"[ \t]*(?:\r?\n|\Z)")
_SPACE = re.compile(r"\s*")
_CLOSES = re.compile(rf"</(?:{_TAGS})>\s*\Z")
_INTERRUPTED = re.compile(r"^\s*\[Request interrupted by user[^\]]*\]\s*$")
_CHANNEL = re.compile(r"^\s*<channel\b[^>]*\bsource=\"[^\"]*\"[^>]*>")


@dataclass(frozen=True, slots=True)
class Stripped:
    text: str
    blocks: tuple[str, ...]

    @property
    def removed_bytes(self) -> int:
        return sum(len(text_bytes(block)) for block in self.blocks)


def _blocks_from(text: str, position: int, *, own_lines: bool) -> tuple[list[str], int]:
    """The blocks that follow one another from POSITION (white space between them), and the
    position after the last one and its white space. OWN_LINES: each block must end its line."""
    blocks: list[str] = []
    while (match := _BLOCK.match(text, position)) is not None:
        if own_lines and _LINE_END.match(text, match.end()) is None:
            break
        blocks.append(match.group(0))
        space = _SPACE.match(text, match.end())
        position = space.end() if space else match.end()
    return blocks, position


def _trailing(text: str, start: int) -> tuple[list[str], int]:
    """The blocks that close TEXT, the first of them at the start of a line at or after
    START, and where that line starts; ([], len(text)) when there are none."""
    if _CLOSES.search(text, start) is None:
        return [], len(text)
    for line in _LINE_START_TAG.finditer(text, start):
        blocks, end = _blocks_from(text, line.start(1), own_lines=False)
        if blocks and end == len(text):
            return blocks, line.start()
    return [], len(text)


def strip_injected(text: str) -> Stripped:
    """Remove the blocks Claude Code injects, only where it puts them: blocks at the start of
    the text that each end their line, and blocks from the start of a line to the end of the
    text. The same tags typed inside a line of the user's own words stay, byte for byte.

    Text without such a block is returned unchanged. The white space after a removed block
    goes with it; blocks at the end also take the white space before them.
    """
    if "<" not in text:
        return Stripped(text, ())
    indent = len(text) - len(text.lstrip())
    leading, position = _blocks_from(text, indent, own_lines=True)
    trailing, cut = _trailing(text, position)
    if not leading and not trailing:
        return Stripped(text, ())
    kept = text[:indent] + text[position:cut]
    if trailing or position == len(text):
        kept = kept.rstrip()
    return Stripped(kept, tuple(leading + trailing))


def strip_injected_content(content: object) -> Stripped:
    """User text with its injected blocks removed: the string content, or the text blocks
    joined by a newline, where a text block made only of injected blocks is dropped whole."""
    if isinstance(content, str):
        return strip_injected(content)
    if not isinstance(content, list):
        return Stripped("", ())
    kept: list[str] = []
    removed: list[str] = []
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "text"
                and isinstance(block.get("text"), str)):
            continue
        stripped = strip_injected(block["text"])
        removed.extend(stripped.blocks)
        if not stripped.blocks or stripped.text.strip():
            kept.append(stripped.text)
    return Stripped("\n".join(kept), tuple(removed))


def is_interrupted_marker(text: str) -> bool:
    return bool(_INTERRUPTED.match(text))


def is_channel_message(text: str) -> bool:
    return bool(_CHANNEL.match(text))
