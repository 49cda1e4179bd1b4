"""Streaming transcript reader: one JSON object per line, constant memory in record size.

Only the current line is ever held; callers keep the small facts they need from each record.
Reading works on byte ranges so that a large file can be read by two processes at once.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

READ_BUFFER = 1 << 20
HASH_CHUNK = 4 << 20
# A line longer than this is measured before it is read (see `_line_at`).
LONG_LINE = 8 << 20
# A `\uD800`-`\uDFFF` escape: Node's JSON.stringify writes one for a lone surrogate (a string cut
# inside a surrogate pair); orjson refuses those, the standard library reads them.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text} is out of range")
    return number


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_line(raw: bytes) -> Any:
    """One JSON value, read the way Node writes it: orjson, and for the rare line that holds
    a lone surrogate escape (which orjson refuses), the standard library with the same limits
    (strict UTF-8, no NaN or Infinity). Raises ValueError when the line is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _loads_with_surrogates(raw)


def _loads_with_surrogates(raw: bytes | bytearray) -> Any:
    """The fallback of `loads_line`, for a line orjson refused."""
    if not _SURROGATE_ESCAPE.search(raw):
        raise ValueError("not JSON")
    return json.loads(raw.decode("utf-8"), parse_float=_finite, parse_constant=_refuse_constant)


def text_bytes(text: str) -> bytes:
    """The bytes a text is digested and measured by: UTF-8, with a lone surrogate kept as its
    own three bytes (so a text that came with one is digested exactly, never refused)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def dumps_line(value: Any) -> bytes:
    """VALUE as one compact JSON line body; a lone surrogate is written back as the escape
    Node writes (`\\udcff`), everything else as orjson writes it."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8", "backslashreplace")


@dataclass(slots=True)
class ReadStats:
    """What the reader saw besides the records: counts and the lines it could not use."""

    lines: int = 0
    bytes_read: int = 0
    unreadable_lines: list[int] = field(default_factory=list)
    torn_final_line: bool = False

    def absorb(self, later: ReadStats) -> None:
        """Append the stats of the range read right after this one."""
        self.unreadable_lines.extend(line + self.lines for line in later.unreadable_lines)
        self.lines += later.lines
        self.bytes_read += later.bytes_read
        self.torn_final_line = later.torn_final_line


class FileDigest:
    """SHA-256 of the first SIZE bytes of an open file, computed by a thread with pread.

    hashlib releases the GIL on large updates, so the parser loses almost nothing to it.
    """

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._size = size
        self._digest = hashlib.sha256()
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        done = 0
        try:
            while done < self._size:
                chunk = os.pread(self._fd, min(HASH_CHUNK, self._size - done), done)
                if not chunk:
                    break
                self._digest.update(chunk)
                done += len(chunk)
        except OSError as exc:
            self._error = exc

    def hexdigest(self) -> str:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._digest.hexdigest()


def _rest_of_line(handle: BinaryIO, budget: int) -> tuple[int, bool]:
    """Skip to the end of a line whose first part was just read: the bytes skipped, and
    whether they end in a newline (not when the file or the BUDGET bytes left end first).
    Nothing skipped is kept, so a line of hundreds of megabytes is never held twice (as
    `readline` would)."""
    skipped = 0
    while skipped < budget:
        chunk = handle.read(min(READ_BUFFER, budget - skipped))
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            handle.seek(newline + 1 - len(chunk), os.SEEK_CUR)
            return skipped + newline + 1, True
        skipped += len(chunk)
    return skipped, False


def _line_at(handle: BinaryIO, offset: int,
             budget: int) -> tuple[bytes | bytearray, int, bool]:
    """The line at OFFSET (HANDLE positioned there): its bytes, its size, and whether it ends
    in a newline. A long line is measured first, then read in one piece by its offset."""
    raw = handle.readline(min(LONG_LINE, budget))
    if len(raw) < LONG_LINE or raw[-1] == 10:
        return raw, len(raw), bool(raw) and raw[-1] == 10
    rest, complete = _rest_of_line(handle, budget - len(raw))
    size = len(raw) + rest
    del raw
    if not complete:
        return b"", size, False
    return _read_exactly(handle.fileno(), size, offset), size, True


def _read_exactly(fd: int, size: int, offset: int) -> bytes | bytearray:
    """SIZE bytes at OFFSET (one read gives at most about 2 GiB on Linux)."""
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    whole = bytearray(data)
    del data
    while len(whole) < size:
        more = os.pread(fd, size - len(whole), offset + len(whole))
        if not more:
            break
        whole += more
    return whole


def read_records(handle: BinaryIO, start: int, length: int,
                 stats: ReadStats) -> Iterator[tuple[int, dict[str, Any], int, int]]:
    """Yield (line number, record, line size, line offset) for the JSON-object lines in the
    LENGTH bytes of HANDLE from offset START. Line numbers count from 1 at START.

    A last line without a newline is a write in progress: it is skipped and flagged in
    `stats.torn_final_line`. Lines that are not JSON objects are listed in
    `stats.unreadable_lines`. Only one line is held, and its bytes are let go of before its
    record is handed on.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    line_no = 0
    consumed = 0
    handle.seek(start)
    try:
        while consumed < length:
            offset = start + consumed
            raw, size, complete = _line_at(handle, offset, length - consumed)
            if not size:
                break
            line_no += 1
            consumed += size
            if not complete:
                stats.torn_final_line = True
                break
            try:
                record = loads(raw)
            except decode_error:
                try:
                    record = _loads_with_surrogates(raw)
                except ValueError:
                    if not raw.isspace():
                        stats.unreadable_lines.append(line_no)
                    continue
            del raw
            if type(record) is not dict:
                stats.unreadable_lines.append(line_no)
                continue
            yield line_no, record, size, offset
            del record
    finally:
        stats.lines = line_no
        stats.bytes_read = consumed


def read_line(fd: int, offset: int, length: int) -> dict[str, Any]:
    """The record of one line, read again by its offset (the line is known to be an object)."""
    record: dict[str, Any] = loads_line(os.pread(fd, length, offset))
    return record
