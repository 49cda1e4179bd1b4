"""Blocks that Claude Code or its plugins inject into user text; they are runtime, not speech."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
# A whole block with the white space after it; the closing tag must match the opening one.
_BLOCK = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>.*?</\1>\s*", re.DOTALL)
_INTERRUPTED = re.compile(r"^\s*\[Request interrupted by user[^\]]*\]\s*$")
_CHANNEL = re.compile(r"^\s*<channel\b[^>]*\bsource=\"[^\"]*\"[^>]*>")


@dataclass(frozen=True, slots=True)
class Stripped:
    text: str
    blocks: tuple[str, ...]

    @property
    def removed_bytes(self) -> int:
        return sum(len(block.encode()) for block in self.blocks)


def strip_injected(text: str) -> Stripped:
    """Remove injected blocks. Text without any block is returned unchanged, byte for byte.

    Where blocks are removed, the white space after each block goes with it, and a block at
    the very end also takes the white space before it: the user's words in between are kept
    exactly.
    """
    if "<" not in text:
        return Stripped(text, ())
    matches = list(_BLOCK.finditer(text))
    if not matches:
        return Stripped(text, ())
    pieces: list[str] = []
    position = 0
    for match in matches:
        pieces.append(text[position : match.start()])
        position = match.end()
    tail = text[position:]
    if position == len(text):
        for index in range(len(pieces) - 1, -1, -1):
            pieces[index] = pieces[index].rstrip()
            if pieces[index]:
                break
    pieces.append(tail)
    return Stripped("".join(pieces), tuple(match.group(0) for match in matches))


def is_interrupted_marker(text: str) -> bool:
    return bool(_INTERRUPTED.match(text))


def is_channel_message(text: str) -> bool:
    return bool(_CHANNEL.match(text))
