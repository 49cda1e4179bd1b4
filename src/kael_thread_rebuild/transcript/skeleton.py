"""A long line read without its long strings: they are measured in pieces, not decoded whole.

A single line can be hundreds of megabytes, nearly all of it one string (a command's output).
Decoding it would hold the line and its text at once (twice its size). Here the line's bytes are
held, every string of at least BIG_STRING bytes is cut out and replaced by a short placeholder,
the rest (the skeleton) is parsed as usual, and each long string becomes a `BigText`: where it
is in the file, its size as UTF-8 and as JSON, checked as strictly as a whole parse would (by
the payload scanner where it runs compiled, else piece by piece). Its words are decoded only if
they are asked for (`BigText.text`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import scanner
from .json_text import dumps_line, loads_line, text_bytes

BIG_STRING = 1 << 20
DECODE_CHUNK = 256 << 10
SCAN_WINDOW = 1 << 20
_QUOTE, _BACKSLASH = 0x22, 0x5C
# Where a string body may be cut: no backslash in the 6 bytes before (so not inside an escape,
# and not between the two escapes of a surrogate pair) and not before a UTF-8 continuation byte.
_SAFE_CUT = re.compile(rb"[^\\]{6}(?![\x80-\xbf])")
_SPACE = b" \t\r\n"


class BigText:
    """A long string of a line, not decoded: OFFSET and LENGTH of its body (between the quotes)
    in the file open as FD, its UTF-8 bytes (lone surrogates as three bytes each) and the bytes
    `dumps_line` writes for it (quotes included). Not a dataclass: orjson would write one as an
    object rather than ask `json_size` what it is."""

    __slots__ = ("fd", "json_bytes", "length", "offset", "utf8_bytes")

    def __init__(self, fd: int, offset: int, length: int, utf8_bytes: int,
                 json_bytes: int) -> None:
        self.fd, self.offset, self.length = fd, offset, length
        self.utf8_bytes, self.json_bytes = utf8_bytes, json_bytes

    def head(self, size: int) -> bytes:
        """The first SIZE bytes of its body as the line has them (escapes not decoded)."""
        return os.pread(self.fd, min(size, self.length), self.offset)

    def text(self) -> str:
        """The decoded string, read again from the file."""
        body = bytearray(self.length + 2)
        body[0] = body[-1] = _QUOTE
        view = memoryview(body)[1:-1]
        done = 0
        while done < self.length:
            got = os.preadv(self.fd, [view[done:]], self.offset + done)
            if not got:
                raise OSError(f"the file ended inside a string at offset {self.offset}")
            done += got
        del view
        text: str = loads_line(body)
        return text


def _quotes(raw: bytes | bytearray) -> Iterator[int]:
    """The offsets of the quotes that open or close a string, in order: escaped backslashes
    and escaped quotes are blanked out a window at a time (a window never ends inside a run of
    backslashes, so every escape is whole in one window), and every quote left is one."""
    size = len(raw)
    start = 0
    while start < size:
        end = min(start + SCAN_WINDOW, size)
        while end < size and raw[end - 1] == _BACKSLASH:
            end += 1
        window = raw[start:end].replace(b"\\\\", b"__").replace(b'\\"', b"__")
        find = window.find
        position = 0
        while (quote := find(b'"', position)) >= 0:
            yield start + quote
            position = quote + 1
        start = end


def _big_spans(raw: bytes | bytearray) -> list[tuple[int, int]]:
    """(start, end) of the body of every string value of at least BIG_STRING bytes (keys are
    left alone). Raises ValueError when a string never ends. (In a line that is not JSON the
    spans may be wrong; then the skeleton or a span does not parse.)"""
    spans: list[tuple[int, int]] = []
    quotes = _quotes(raw)
    for opening in quotes:
        closing = next(quotes, -1)
        if closing < 0:
            raise ValueError("a string does not end")
        if closing - opening - 1 >= BIG_STRING and not _is_key(raw, closing + 1):
            spans.append((opening + 1, closing))
    return spans


def _is_key(raw: bytes | bytearray, after: int) -> bool:
    while after < len(raw) and raw[after] in _SPACE:
        after += 1
    return after < len(raw) and raw[after] == 0x3A  # ":"


def _measure(raw: bytes | bytearray, start: int, end: int) -> tuple[int, int]:
    """UTF-8 and JSON bytes of the string body raw[START:END], decoded a piece at a time;
    raises ValueError when a piece is not valid JSON string content."""
    utf8, written = 0, 2
    while start < end:
        cut = end
        if end - start > DECODE_CHUNK:
            found = _SAFE_CUT.search(raw, start + DECODE_CHUNK - 6, end)
            cut = found.end() if found else end
        piece = loads_line(b'"' + raw[start:cut] + b'"')
        if type(piece) is not str:
            raise ValueError("not a string")
        utf8 += len(piece) if piece.isascii() else len(text_bytes(piece))
        written += len(dumps_line(piece)) - 2
        start = cut
    return utf8, written


def loads_long_line(raw: bytes | bytearray, fd: int, offset: int) -> Any:
    """The value of the line RAW (at OFFSET of the file open as FD), with each long string
    value a `BigText`. Raises ValueError when the line is not JSON."""
    found = _long_strings(raw)
    if not found:
        return loads_line(raw)
    return loads_skeleton(raw, fd, offset, found, new_mark())


def _long_strings(raw: bytes | bytearray) -> list[int]:
    """Start, end, UTF-8 and JSON bytes of every string value of RAW of at least BIG_STRING
    bytes: found by the scanner where it runs compiled (it tells the same, three times faster),
    else (or where it refuses the line, so that the same is refused) piece by piece. A line of
    2 GiB or more comes as a bytearray (`reader._read_exactly`): the scanner takes bytes, and a
    copy would hold the line twice, so it is read in pieces."""
    if scanner.COMPILED and type(raw) is bytes:
        with contextlib.suppress(ValueError):
            return scanner.long_strings(raw, BIG_STRING)
    found: list[int] = []
    for start, end in _big_spans(raw):
        found += (start, end, *_measure(raw, start, end))
    return found


def new_mark() -> str:
    """A prefix no string of a transcript starts with, for `loads_skeleton`'s placeholders."""
    return "\0" + os.urandom(8).hex() + ":"


def loads_skeleton(raw: bytes | bytearray | memoryview, fd: int, offset: int, found: Sequence[int],
                   mark: str) -> Any:
    """The value of the line RAW (at OFFSET of the file open as FD), with the string values
    FOUND (four numbers each: their body's start and end in RAW, UTF-8 and JSON bytes, as
    `scanner.long_strings` gives them) as `BigText`s: the rest of the line is parsed with each
    of them replaced by a short placeholder starting with MARK (`new_mark`). Raises ValueError
    when that rest is not JSON."""
    placeholder = ("\\u0000" + mark[1:]).encode()
    pieces: list[bytes | bytearray | memoryview] = []
    bigs: list[BigText] = []
    last = 0
    for number in range(0, len(found), 4):
        start, end, utf8, written = found[number:number + 4]
        bigs.append(BigText(fd, offset + start, end - start, utf8, written))
        pieces += (raw[last:start], placeholder, str(number // 4).encode())
        last = end
    pieces.append(raw[last:])
    value = loads_line(b"".join(pieces))
    del pieces
    _restore(value, mark, bigs)
    return value


def _restore(value: Any, mark: str, bigs: list[BigText]) -> None:
    """Put each BigText where its placeholder is."""
    def swap(item: Any) -> Any:
        if type(item) is str and item.startswith(mark):
            return bigs[int(item[len(mark):])]
        return item

    _swap_leaves(value, swap)


def _swap_leaves(value: Any, swap: Callable[[Any], Any]) -> None:
    """Replace each leaf of the containers in VALUE by SWAP(leaf), in place (iteratively:
    nesting can be deep)."""
    stack = [value]
    while stack:
        current = stack.pop()
        pairs = current.items() if type(current) is dict else enumerate(current)
        for key, item in list(pairs):
            if type(item) in (dict, list):
                stack.append(item)
            elif (new := swap(item)) is not item:
                current[key] = new


def json_size(value: Any) -> int:
    """The bytes `dumps_line` writes for VALUE, which may hold BigTexts (counted at the size
    they would be written at)."""
    extra = 0

    def big(item: Any) -> str:
        nonlocal extra
        if isinstance(item, BigText):
            extra += item.json_bytes - 2
            return ""
        raise TypeError(f"{type(item).__name__} is not JSON")

    return len(dumps_line(value, default=big)) + extra


def materialize(value: Any) -> Any:
    """VALUE with every BigText in it decoded (the containers are changed in place)."""
    if isinstance(value, BigText):
        return value.text()
    if type(value) in (dict, list):
        _swap_leaves(value, lambda item: item.text() if isinstance(item, BigText) else item)
    return value
