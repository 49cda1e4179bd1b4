"""The manifest: per carried item, where it came from and the digests that prove it verbatim.

It holds digests, positions and ids only, never conversation text.
"""

from __future__ import annotations

import uuid
from enum import StrEnum

from pydantic import BaseModel


class ItemKind(StrEnum):
    startup_snapshot = "startup_snapshot"
    speech = "speech"
    compact_summary = "compact_summary"
    open_tail_marker = "open_tail_marker"


class ManifestItem(BaseModel):
    position: int
    uuid: str
    role: str
    kind: ItemKind
    origin: str | None
    turn: int | None
    source_uuid: str | None
    source_line: int | None
    source_timestamp: str | None
    source_sha256: str | None
    carried_sha256: str
    stamp_prefix: str | None = None


class ManifestCounts(BaseModel):
    source_turns: int
    selected_turns: int
    dropped_oldest_turns: int
    source_speech_items: int
    carried_speech_items: int
    dropped_by_budget_items: int
    dropped_open_tail_items: int
    open_tail_carried: bool


class Manifest(BaseModel):
    format: int = 1
    engine_version: str
    new_session_id: str
    candidate_file: str
    created_at: str
    source_path: str
    source_sha256: str
    source_session_id: str
    claude_code_version: str | None
    startup_sha256: str | None
    counts: ManifestCounts
    items: list[ManifestItem]


def item_uuid(session_id: str, position: int, source_uuid: str | None) -> str:
    """Deterministic item id: UUID v5 of (new session id, position, source uuid)."""
    return str(uuid.uuid5(uuid.UUID(session_id), f"{position}:{source_uuid or ''}"))
