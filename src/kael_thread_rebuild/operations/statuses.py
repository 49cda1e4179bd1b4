"""Operation statuses read with the standard library only.

The Stop hook runs after every reply of the Claude Code session; almost always nothing waits
for it, and it must then cost next to nothing, so it looks at the records' `status` before
anything heavy is imported.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

#: An operation id (`<UTC yyyymmddTHHMMSSZ>-<8 hex>`); its record is `operations/<id>.json`.
OPERATION_ID_PATTERN = r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}"
_RECORD_NAME = re.compile(OPERATION_ID_PATTERN + r"\.json")

# The states a Stop moves on (pending -> scheduled, rollback_pending -> rollback_scheduled).
WAITING_FOR_STOP = frozenset({"pending", "rollback_pending"})


def entries(operations_dir: Path) -> list[Path]:
    """Everything in the operations dir but hidden names (a writer's temporary files)."""
    try:
        return [p for p in operations_dir.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []


def is_record_name(name: str) -> bool:
    return _RECORD_NAME.fullmatch(name) is not None


def record_files(operations_dir: Path) -> list[Path]:
    """The entries named like a record; anything else there is not one (and is never read)."""
    return [p for p in entries(operations_dir) if is_record_name(p.name)]


def statuses(operations_dir: Path) -> Iterator[tuple[Path, str | None]]:
    """(record path, status) of every record; None where the record cannot be read."""
    for path in record_files(operations_dir):
        try:
            # Never through a symlink, never a FIFO (a read that could wait forever).
            status = json.loads(path.read_bytes()).get("status") \
                if stat.S_ISREG(path.lstat().st_mode) else None
        except (OSError, ValueError, AttributeError):
            status = None
        yield path, status if isinstance(status, str) else None


def something_waits_for_stop(operations_dir: Path) -> bool:
    """True when an operation waits for a Stop. A file that cannot be read is not an operation
    (the store skips it too, and status, history and doctor report it)."""
    return any(status in WAITING_FOR_STOP for _, status in statuses(operations_dir))
