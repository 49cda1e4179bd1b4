"""The startup snapshot: the context Claude Code injected when the session started, frozen.

In 2.1.328 it is the rendered content of the first turn's attachments (those not regenerated on
resume); older versions put it as `<system-reminder>` blocks at the start of the first user
record; a candidate of ours carries it as its first record. It is carried once, as the first
item, with its time and SHA-256; the files it came from change daily, and the new session must
not receive a past that never existed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .records import RecordFacts


@dataclass(slots=True, frozen=True)
class Snapshot:
    text: str
    captured_at: str | None
    source_uuid: str
    source_line: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def find_snapshot(records: list[RecordFacts]) -> Snapshot | None:
    """Collect snapshot text from the records of the first turn (before the first assistant)."""
    parts: list[RecordFacts] = []
    for record in records:
        if record.kind == "assistant":
            break
        if record.snapshot_text:
            parts.append(record)
            if record.marker_kind == "startup_snapshot":
                break
    if not parts:
        return None
    first = parts[0]
    text = "\n".join(part.snapshot_text or "" for part in parts)
    return Snapshot(text, first.timestamp, first.uuid or "", first.line)
