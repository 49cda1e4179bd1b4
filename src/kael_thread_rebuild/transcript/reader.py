"""Streaming transcript reader: one JSON object per line, constant memory in record size.

Only the current line is ever held; callers keep the small facts they need from each record.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

READ_BUFFER = 1 << 20
HASH_CHUNK = 4 << 20


@dataclass(slots=True)
class ReadStats:
    """What the reader saw besides the records: counts, digest, lines it could not use."""

    lines: int = 0
    bytes_read: int = 0
    unreadable_lines: list[int] = field(default_factory=list)
    torn_final_line: bool = False
    sha256: str = ""


class _FollowingDigest:
    """SHA-256 of the bytes the parser has consumed, computed on the other core.

    The thread reads the same open file with pread (no shared offset, no copies handed across
    threads) and never runs ahead of the parser, so the digest covers exactly the bytes parsed.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._digest = hashlib.sha256()
        self._hashed = 0
        self.progress = 0
        self._final: int | None = None
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            final = self._final
            limit = self.progress if final is None else final
            while self._hashed < limit:
                chunk = os.pread(self._fd, min(HASH_CHUNK, limit - self._hashed), self._hashed)
                if not chunk:
                    return
                self._digest.update(chunk)
                self._hashed += len(chunk)
            if final is not None:
                return
            self._wake.wait(0.005)
            self._wake.clear()

    def finish(self, total: int) -> str:
        self._final = total
        self._wake.set()
        self._thread.join()
        return self._digest.hexdigest()


def read_records(path: Path, stats: ReadStats) -> Iterator[tuple[int, dict[str, Any], int]]:
    """Yield (line number, record, line size in bytes) for every JSON-object line of PATH.

    A final line without a newline is a write in progress: it is skipped and flagged in
    `stats.torn_final_line`. Lines that are not JSON objects are listed in
    `stats.unreadable_lines` (1-based). The SHA-256 covers every byte read.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    with path.open("rb", buffering=READ_BUFFER) as handle:
        digest = _FollowingDigest(handle.fileno())
        line_no = 0
        consumed = 0
        try:
            for raw in handle:
                line_no += 1
                size = len(raw)
                consumed += size
                digest.progress = consumed
                if raw[-1] != 10:
                    stats.torn_final_line = True
                    break
                try:
                    record = loads(raw)
                except decode_error:
                    if not raw.isspace():
                        stats.unreadable_lines.append(line_no)
                    continue
                if type(record) is not dict:
                    stats.unreadable_lines.append(line_no)
                    continue
                yield line_no, record, size
        finally:
            stats.lines = line_no
            stats.bytes_read = consumed
            stats.sha256 = digest.finish(consumed)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(READ_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()
