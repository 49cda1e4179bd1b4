"""Append-only one-line logs in the state dir (`hook.log`, `worker.log`).

Callers pass engine sentences only (ids, states, reasons), never conversation text. Each line is
written with a single `write` on an `O_APPEND` descriptor, so lines from concurrent processes do
not interleave. Kept free of heavy imports: the Stop hook uses it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

LOG_MODE = 0o600


def append_line(path: Path, message: str) -> None:
    """Append `<UTC time> MESSAGE` as one line (newlines inside MESSAGE are flattened)."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    flat = " / ".join(part for part in message.splitlines() if part.strip())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, LOG_MODE)
    try:
        os.write(fd, f"{stamp} {flat}\n".encode())
    finally:
        os.close(fd)
