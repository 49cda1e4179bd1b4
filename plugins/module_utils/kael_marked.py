"""A marked block in a text file of the user's, added and removed so that the file comes back
byte for byte: appended after text that ends a line (or to an empty file), put first in a file
whose last line has no newline (so nothing of the user's is changed to make room for it), and
removed exactly, from its first line to its last."""

from __future__ import annotations


def _normal(block: str) -> str:
    return block if block.endswith("\n") else block + "\n"


def find(text: str, begin: str, end: str) -> tuple[int, int] | None:
    """Where the block from the line BEGIN to the line END lies in TEXT (start, stop: stop past
    END's newline), or None."""
    at = 0
    while True:
        start = text.find(begin, at)
        if start < 0:
            return None
        if start == 0 or text[start - 1] == "\n":
            stop = text.find("\n" + end, start)
            if stop < 0:
                return None
            stop += 1 + len(end)
            if stop < len(text) and text[stop] == "\n":
                stop += 1
            return start, stop
        at = start + 1


def without(text: str, begin: str, end: str) -> str:
    found = find(text, begin, end)
    return text if found is None else text[:found[0]] + text[found[1]:]


def with_block(text: str, block: str, first: bool = False) -> str:
    """TEXT with BLOCK (its first and last lines are its markers) in place: replaced where it
    is, else appended (or put first: always when FIRST, see the module's doc)."""
    block = _normal(block)
    lines = block.splitlines()
    found = find(text, lines[0], lines[-1])
    if found is not None:
        return text[:found[0]] + block + text[found[1]:]
    if not first and (not text or text.endswith("\n")):
        return text + block
    return block + text
