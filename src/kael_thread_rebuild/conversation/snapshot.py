"""The startup snapshot: the context Claude Code injected when the session started, frozen.

In 2.1.328 it is the rendered content of the first turn's attachments (those not regenerated on
resume); older versions put it as `<system-reminder>` blocks at the start of the first user
record; a candidate of ours carries it as its first record. It is carried once, as the first
item, with its time and SHA-256: the files it came from change daily, and the new session must
not receive a past that never existed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..transcript.reader import text_bytes
from .records import Classifier
from .table import Kind


@dataclass(slots=True, frozen=True)
class Snapshot:
    text: str
    captured_at: str | None
    source_uuid: str
    source_line: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(text_bytes(self.text)).hexdigest()


def find_snapshot(rows: Sequence[int], read: Classifier) -> Snapshot | None:
    """Snapshot text from the branch records of the first turn (before the first assistant)."""
    table = read.table
    parts: list[int] = []
    for row in rows:
        if table.kinds[row] == Kind.assistant:
            break
        if row in read.snapshot_texts:
            parts.append(row)
            if read.markers.get(row) == "startup_snapshot":
                break
    if not parts:
        return None
    first = read.snapshot_texts[parts[0]]
    text = "\n".join(read.snapshot_texts[row].text for row in parts)
    return Snapshot(text, first.timestamp, first.uuid, table.lines[parts[0]])
