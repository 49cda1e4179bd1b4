"""Streaming transcript reader: one JSON object per line, constant memory in record size.

Only the current line is ever held; callers keep the small facts they need from each record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

READ_BUFFER = 1 << 20


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
    digest = hashlib.sha256()
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
