"""Streaming transcript reader: one JSON object per line, constant memory in record size.

Only the current line is ever held; callers keep the small facts they need from each record.
Reading works on byte ranges so that a large file can be read by two processes at once.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import orjson

from . import scanner as scanner_module
from .digest_turns import digest_ended, digest_started
from .json_text import dumps_line, loads_line, loads_with_surrogates, text_bytes
from .mapped_file import mapped_chunks, mapped_lines
from .sha256_state import ResumableSha256
from .skeleton import loads_long_line, loads_skeleton, new_mark

__all__ = ["FileDigest", "Handoff", "ReadStats", "dumps_line", "loads_line", "next_line_start",
           "read_line", "read_records", "text_bytes"]

READ_BUFFER = 1 << 20
# How often a range that another reader may take over asks whether it should stop sooner.
HANDOFF_STEP = 1 << 20
# A line longer than this is measured before it is read, and read by its offset without
# decoding its long strings (see `mapped_lines`, `skeleton`). Parsed whole, a line of a few MiB
# is held three times for a moment (its bytes, its text, the text's UTF-8 to measure it): at
# 8 MiB, a generated 1 GiB plan peaked 15 MiB higher, and was no faster (benchmarks/README.md,
# "Figures: issue 26, the end of the child's part").
LONG_LINE = 2 << 20
# The compiled engine leaves every string value of at least this many bytes undecoded (a
# `skeleton.BigText`), in a line longer than SCAN_ABOVE (a shorter line rarely holds one, and
# would be read twice: scanned, then parsed whole); see benchmarks/README.md, "The payload
# scanner", for how they were chosen.
SKIP_LEAST = 16384
SCAN_ABOVE = SKIP_LEAST
# Whether the compiled engine is the default where the scanner runs compiled. Not yet: on the
# generated transcripts it is no faster than parsing every line whole (benchmarks/README.md).
SCANNER_BY_DEFAULT = False
ENGINE_VARIABLE = "KAEL_SCANNER"
# The scanner this engine calls: a variable, so that it can be swapped (the tests run the
# interpreted one), where a compiled module binds what it imports once.
scanner: ModuleType = scanner_module
ENGINES = ("compiled", "interpreted")


def engine() -> str:
    """How lines are read: "compiled", the scanner finds the long string values of a line and
    measures them, and only the rest is parsed; "interpreted", every line is parsed whole (and
    only a line longer than LONG_LINE has its strings of a megabyte or more left undecoded).
    KAEL_SCANNER=compiled|interpreted chooses (compiled with an interpreted scanner gives the
    same records, slowly: for tests); unset, the compiled engine runs where `scanner` runs
    compiled if SCANNER_BY_DEFAULT."""
    forced = os.environ.get(ENGINE_VARIABLE, "")
    if forced in ENGINES:
        return forced
    return "compiled" if SCANNER_BY_DEFAULT and scanner.COMPILED else "interpreted"


@dataclass(slots=True)
class ReadStats:
    """What the reader saw besides the records: counts and the lines it could not use."""

    lines: int = 0
    bytes_read: int = 0
    unreadable_lines: list[int] = field(default_factory=list)
    torn_final_line: bool = False
    # The size of that torn final line (its bytes are counted in bytes_read).
    torn_bytes: int = 0

    def absorb(self, later: ReadStats) -> None:
        """Append the stats of the range read right after this one."""
        self.unreadable_lines.extend(line + self.lines for line in later.unreadable_lines)
        self.lines += later.lines
        self.bytes_read += later.bytes_read
        self.torn_final_line = later.torn_final_line
        self.torn_bytes = later.torn_bytes


class FileDigest:
    """SHA-256 of the first SIZE bytes of an open file, computed by a thread from a mapping of it
    (`mapped_file.mapped_chunks`: nothing copied).

    hashlib releases the GIL on large updates, so the parser loses almost nothing to it. With
    RESUMABLE (see `sha256_state`) the digest goes on from STATE, the state of the bytes before
    START, and the state at every chunk boundary is kept (`state_at`) for the scan cache.
    """

    def __init__(self, fd: int, size: int, *, start: int = 0, state: bytes | None = None,
                 resumable: bool = False) -> None:
        self._fd = fd
        self._size = size
        self._start = start
        self._digest: Any = ResumableSha256(state) if resumable else hashlib.sha256()
        self.checkpoints: list[tuple[int, bytes]] = []
        self._error: OSError | None = None
        # Not `_thread`: compiled, that field's C name would be a C keyword.
        self._worker = threading.Thread(target=self._run, name="sha256", daemon=True)
        digest_started()
        try:
            self._worker.start()
        except BaseException:
            digest_ended()
            raise

    def _run(self) -> None:
        done = self._start
        keep = isinstance(self._digest, ResumableSha256)
        try:
            for chunk in mapped_chunks(self._fd, done, self._size - done):
                if keep:
                    self.checkpoints.append((done, self._digest.state()))
                self._digest.update(chunk)
                done += len(chunk)
            if keep:
                self.checkpoints.append((done, self._digest.state()))
        except OSError as exc:
            self._error = exc
        finally:
            digest_ended()

    def hexdigest(self) -> str:
        self._worker.join()
        if self._error is not None:
            raise self._error
        return str(self._digest.hexdigest())

    def state_at(self, limit: int) -> tuple[int, bytes] | None:
        """The last saved (offset, state) at or before LIMIT (after `hexdigest`)."""
        index = bisect.bisect_right(self.checkpoints, limit, key=lambda point: point[0])
        return self.checkpoints[index - 1] if index else None


def _blank(raw: bytes | bytearray | memoryview) -> bool:
    return (bytes(raw) if isinstance(raw, memoryview) else raw).isspace()


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


class Handoff(Protocol):
    """Another reader that may take over the end of a range while it is read."""

    def end_at(self, next_line: int, end: int) -> int:
        """Where the range now ends: END, or a line start between NEXT_LINE (the offset of the
        line about to be read) and END from which the other reader reads the rest."""


def read_records(fd: int, start: int, length: int, stats: ReadStats, *,
                 settle: Callable[[dict[str, Any]], None], handoff: Handoff | None = None,
                 ) -> Iterator[tuple[int, dict[str, Any], int, int]]:
    """Yield (line number, record, line size, line offset) for the JSON-object lines in the
    LENGTH bytes of the file open as FD from offset START. Line numbers count from 1 at START.
    HANDOFF: asked about every HANDOFF_STEP bytes whether the range ends sooner (see
    `Handoff`); the lines from there on are not read.

    A long string value may be left undecoded, a `skeleton.BigText` (a line longer than
    LONG_LINE; with the compiled engine, any string value of SKIP_LEAST bytes or more, see
    `engine`): SETTLE is called on each record that holds one before it is yielded, to decode
    those its reader needs as text (`conversation.measured`).

    A last line without a newline is a write in progress: it is skipped and flagged in
    `stats.torn_final_line`. Lines that are not JSON objects are listed in
    `stats.unreadable_lines`. Only one line is held, and its bytes are let go of before its
    record is handed on.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    skip_above = SCAN_ABOVE if engine() == "compiled" else LONG_LINE
    mark = new_mark()
    line_no = 0
    consumed = 0
    end = start + length
    # One comparison a line: past CHECK_AT, the range may have ended or the handoff is asked.
    check_at = start + HANDOFF_STEP if handoff is not None else end
    try:
        for offset, size, view, complete in mapped_lines(fd, start, length, LONG_LINE):
            if offset >= check_at:
                end, check_at = _next_check(offset, end, handoff)
                if offset >= end:
                    break
            line_no += 1
            consumed += size
            if not complete:
                stats.torn_final_line = True
                stats.torn_bytes = size
                break
            raw: bytes | bytearray | memoryview
            try:
                if view is None:  # longer than LONG_LINE
                    raw = _read_exactly(fd, size, offset)
                    record, skeletal = loads_long_line(raw, fd, offset), True
                elif size > skip_above:
                    raw = view
                    record, skeletal = _loads_scanned(raw, fd, offset, mark)
                else:
                    raw, skeletal = view, False
                    try:
                        record = loads(raw)
                    except decode_error:
                        record = loads_with_surrogates(raw)
            except ValueError:
                if not _blank(raw):
                    stats.unreadable_lines.append(line_no)
                continue
            del raw, view
            if type(record) is not dict:
                stats.unreadable_lines.append(line_no)
                continue
            if skeletal:
                settle(record)
            yield line_no, record, size, offset
            del record
    finally:
        stats.lines = line_no
        stats.bytes_read = consumed


def next_line_start(fd: int, position: int, limit: int) -> int | None:
    """The offset just after the first newline at or past POSITION and before LIMIT in the file
    open as FD, if there is one."""
    while position < limit:
        probe = os.pread(fd, min(READ_BUFFER, limit - position), position)
        if not probe:
            return None
        newline = probe.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(probe)
    return None


def _next_check(offset: int, end: int, handoff: Handoff | None) -> tuple[int, int]:
    """At OFFSET, past the last check: where the range ends now (HANDOFF asked, while there is
    more to read) and where the next check is."""
    if handoff is not None and offset < end:
        end = handoff.end_at(offset, end)
    return end, min(offset + HANDOFF_STEP, end)


def _loads_scanned(raw: bytes | bytearray | memoryview, fd: int, offset: int,
                   mark: str) -> tuple[Any, bool]:
    """The value of the line RAW, its string values of SKIP_LEAST bytes or more as BigTexts,
    and whether it has any. A line the scanner or the parse of its skeleton refuses is parsed
    whole, so that what is read or refused is decided as on the interpreted engine."""
    try:
        found = scanner.long_strings(bytes(raw), SKIP_LEAST)
        if found:
            return loads_skeleton(raw, fd, offset, found, mark), True
    except ValueError:
        pass
    return loads_line(raw), False


def read_line(fd: int, offset: int, length: int) -> dict[str, Any]:
    """The record of one line, read again by its offset (the line is known to be an object)."""
    record: dict[str, Any] = loads_line(os.pread(fd, length, offset))
    return record
