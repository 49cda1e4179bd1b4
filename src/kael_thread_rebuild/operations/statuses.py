"""Operation statuses read with the standard library only.

The Stop hook runs after every reply of the Claude Code session; almost always nothing waits
for it, and it must then cost next to nothing, so it looks at the records' `status` before
anything heavy is imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

# The states a Stop moves on (pending -> scheduled, rollback_pending -> rollback_scheduled).
WAITING_FOR_STOP = frozenset({"pending", "rollback_pending"})


def record_files(operations_dir: Path) -> list[Path]:
    try:
        return [p for p in operations_dir.glob("*.json") if not p.name.startswith(".")]
    except OSError:
        return []


def statuses(operations_dir: Path) -> Iterator[tuple[Path, str | None]]:
    """(record path, status) of every record; None where the record cannot be read."""
    for path in record_files(operations_dir):
        try:
            status = json.loads(path.read_bytes()).get("status")
        except (OSError, ValueError, AttributeError):
            status = None
        yield path, status if isinstance(status, str) else None


def something_waits_for_stop(operations_dir: Path) -> bool:
    """True when an operation waits for a Stop, or a record cannot be read (let the full
    path look at it)."""
    return any(status is None or status in WAITING_FOR_STOP
               for _, status in statuses(operations_dir))
