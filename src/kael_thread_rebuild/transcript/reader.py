"""Streaming transcript reader: one JSON object per line, constant memory in record size.

Only the current line is ever held; callers keep the small facts they need from each record.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

READ_BUFFER = 1 << 20
HASH_BATCH_BYTES = 8 << 20


class _BackgroundDigest:
    """SHA-256 on the other core: hashlib drops the GIL for large updates, so the digest of
    every byte read costs the parsing thread almost nothing."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._queue: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=4)
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            for chunk in batch:
                self._digest.update(chunk)

    def update(self, data: bytes) -> None:
        self._batch.append(data)
        self._batch_bytes += len(data)
        if self._batch_bytes >= HASH_BATCH_BYTES:
            self._queue.put(self._batch)
            self._batch = []
            self._batch_bytes = 0

    def hexdigest(self) -> str:
        self._queue.put(self._batch)
        self._queue.put(None)
        self._thread.join()
        return self._digest.hexdigest()


@dataclass(slots=True)
class ReadStats:
    """What the reader saw besides the records: counts, digest, lines it could not use."""

    lines: int = 0
    bytes_read: int = 0
    unreadable_lines: list[int] = field(default_factory=list)
    torn_final_line: bool = False
    sha256: str = ""


def read_records(path: Path, stats: ReadStats) -> Iterator[tuple[int, dict[str, Any], int]]:
    """Yield (line number, record, line size in bytes) for every JSON-object line of PATH.

    A final line without a newline is a write in progress: it is skipped and flagged in
    `stats.torn_final_line`. Lines that are not JSON objects are listed in
    `stats.unreadable_lines` (1-based). The SHA-256 covers every byte read.
    """
    digest = _BackgroundDigest()
    loads = orjson.loads
    with path.open("rb", buffering=READ_BUFFER) as handle:
        line_no = 0
        for raw in handle:
            line_no += 1
            size = len(raw)
            digest.update(raw)
            stats.bytes_read += size
            if not raw.endswith(b"\n"):
                stats.torn_final_line = True
                break
            if size <= 1 or raw.isspace():
                continue
            try:
                record = loads(raw)
            except orjson.JSONDecodeError:
                stats.unreadable_lines.append(line_no)
                continue
            if not isinstance(record, dict):
                stats.unreadable_lines.append(line_no)
                continue
            yield line_no, record, size
        stats.lines = line_no
    stats.sha256 = digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(READ_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()
