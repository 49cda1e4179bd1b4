"""Write the candidate session (a strict linear chain of user/assistant records) and its manifest.

Layout decisions (see docs/candidate-format.md): user content is a string; each assistant item is
one record with one text block, and all assistant records of a turn share one `message.id` so
Claude Code sends them as one message; timestamps increase by 1 ms and end at write time; item
ids are UUID v5 of (new session id, position, source uuid).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Config
from ..conversation.records import MARKER, Origin, Role, wrap_snapshot
from ..conversation.turns import Item
from ..fsutil import atomic_write_bytes, atomic_write_json
from ..paths import MANIFEST_SUFFIX
from ..plan import Plan
from ..transcript.reader import dumps_line, text_bytes
from .manifest import ItemKind, Manifest, ManifestCounts, ManifestItem, item_uuid
from .verifier import Verification, verify_candidate

# The words the new session sees after an unanswered last message (see docs/candidate-format.md).
OPEN_TAIL_NOTICE = (
    "[kael-thread-rebuild] The message above arrived just before this conversation moved to a "
    "fresh session, and it has not been answered yet."
)
SYNTHETIC_MODEL = "<synthetic>"


@dataclass(slots=True)
class CandidateResult:
    new_session_id: str
    candidate_path: Path
    manifest_path: Path
    candidate_sha256: str
    manifest: Manifest
    verification: Verification


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _stamp(timestamp: str | None) -> str | None:
    if not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return f"[{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC] "


def _sha(text: str) -> str:
    return hashlib.sha256(text_bytes(text)).hexdigest()


class _Builder:
    def __init__(self, plan: Plan, config: Config, session_id: str) -> None:
        self.plan = plan
        self.session_id = session_id
        self.cwd = str(config.claude_workdir) if config.claude_workdir else (plan.cwd or "")
        self.version = plan.report.claude_code_version or f"kael-thread-rebuild {__version__}"
        self.model = plan.model or "claude"
        self.records: list[dict[str, Any]] = []
        self.items: list[ManifestItem] = []

    def add(self, role: Role, content: str, kind: ItemKind, *, item: Item | None,
            turn: int | None, source_sha256: str | None, carried_sha256: str,
            marker: dict[str, Any], message_id: str | None = None,
            model: str | None = None) -> None:
        position = len(self.records)
        source_uuid = item.source_uuid if item else marker.get("sourceUuid")
        record_id = item_uuid(self.session_id, position, source_uuid)
        record: dict[str, Any] = {
            "parentUuid": self.records[-1]["uuid"] if self.records else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "type": role.value,
            "uuid": record_id,
            "timestamp": "",
            MARKER: {"kind": kind.value, **marker},
        }
        if item is not None and item.source_timestamp:
            record["sourceTimestamp"] = item.source_timestamp
        if role is Role.user:
            record["message"] = {"role": "user", "content": content}
            if kind is ItemKind.startup_snapshot:
                record["isMeta"] = True
        else:
            record["message"] = {
                "id": message_id, "type": "message", "role": "assistant",
                "model": model or self.model,
                "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        self.records.append(record)
        self.items.append(ManifestItem(
            position=position, uuid=record_id, role=role.value, kind=kind,
            origin=item.origin.value if item else None, turn=turn,
            source_uuid=source_uuid, source_line=item.source_line if item else None,
            source_timestamp=item.source_timestamp if item else None,
            source_sha256=source_sha256, carried_sha256=carried_sha256,
            stamp_prefix=marker.get("stampPrefix"),
        ))


def build_records(plan: Plan, config: Config, session_id: str,
                  now: datetime) -> tuple[list[dict[str, Any]], list[ManifestItem]]:
    builder = _Builder(plan, config, session_id)
    snapshot = plan.snapshot
    if snapshot is not None:
        captured = snapshot.captured_at or ""
        builder.add(Role.user, wrap_snapshot(snapshot.text, captured, snapshot.sha256),
                    ItemKind.startup_snapshot, item=None, turn=None,
                    source_sha256=snapshot.sha256, carried_sha256=snapshot.sha256,
                    marker={"sourceUuid": snapshot.source_uuid, "capturedAt": captured,
                            "sha256": snapshot.sha256})
    first_turn = plan.report.dropped_oldest_turns
    words = iter(plan.texts())
    for offset, turn in enumerate(plan.turns):
        number = first_turn + offset
        message_id = "msg_kael_" + uuid.uuid5(uuid.UUID(session_id), f"turn:{number}").hex[:24]
        for index, item in enumerate(turn.user):
            kind = (ItemKind.compact_summary if item.origin is Origin.compact_summary
                    else ItemKind.speech)
            marker: dict[str, Any] = {"origin": item.origin.value, "sourceUuid": item.source_uuid}
            prefix = _stamp(item.source_timestamp) if config.stamp_turns and index == 0 else None
            if prefix:
                marker["stampPrefix"] = prefix
            builder.add(Role.user, (prefix or "") + next(words), kind, item=item, turn=number,
                        source_sha256=item.sha256, carried_sha256=item.sha256, marker=marker)
        for item in turn.assistant:
            builder.add(Role.assistant, next(words), ItemKind.speech, item=item, turn=number,
                        source_sha256=item.sha256, carried_sha256=item.sha256,
                        marker={"origin": item.origin.value, "sourceUuid": item.source_uuid},
                        message_id=message_id)
    if plan.turns and plan.turns[-1].is_open:
        builder.add(Role.assistant, OPEN_TAIL_NOTICE, ItemKind.open_tail_marker, item=None,
                    turn=None, source_sha256=None, carried_sha256=_sha(OPEN_TAIL_NOTICE),
                    marker={}, message_id="msg_kael_open_tail", model=SYNTHETIC_MODEL)
    count = len(builder.records)
    for position, record in enumerate(builder.records):
        record["timestamp"] = _iso(now - timedelta(milliseconds=count - position))
    return builder.records, builder.items


def write_candidate(plan: Plan, output_dir: Path, config: Config, *,
                    manifest_dir: Path | None = None,
                    session_id: str | None = None) -> CandidateResult:
    """Write `<id>.jsonl` into OUTPUT_DIR and `<id>.manifest.json` into MANIFEST_DIR (default
    OUTPUT_DIR), atomically, 0600, never overwriting; then verify both from disk."""
    new_id = session_id or str(uuid.uuid4())
    now = datetime.now(UTC)
    records, items = build_records(plan, config, new_id, now)
    report = plan.report
    carried = sum(1 for item in items if item.kind in (ItemKind.speech, ItemKind.compact_summary))
    dropped_by_budget = (report.source_speech_items - report.dropped_open_tail_items
                         - report.carried_speech_items)
    candidate_path = output_dir / f"{new_id}.jsonl"
    manifest_path = (manifest_dir or output_dir) / f"{new_id}{MANIFEST_SUFFIX}"
    manifest = Manifest(
        engine_version=__version__,
        new_session_id=new_id,
        candidate_file=candidate_path.name,
        created_at=_iso(now),
        source_path=report.source_path,
        source_sha256=report.source_sha256,
        source_session_id=report.source_session_id,
        claude_code_version=report.claude_code_version,
        startup_sha256=report.startup_sha256,
        counts=ManifestCounts(
            source_turns=report.source_turns,
            selected_turns=report.selected_turns,
            dropped_oldest_turns=report.dropped_oldest_turns,
            source_speech_items=report.source_speech_items,
            carried_speech_items=carried,
            dropped_by_budget_items=dropped_by_budget,
            dropped_open_tail_items=report.dropped_open_tail_items,
            open_tail_carried=report.open_tail_carried,
        ),
        items=items,
    )
    data = b"".join(dumps_line(record) + b"\n" for record in records)
    atomic_write_bytes(candidate_path, data, 0o600, overwrite=False)
    atomic_write_json(manifest_path, manifest.model_dump(mode="json"), 0o600, overwrite=False)
    verification = verify_candidate(candidate_path, manifest_path, plan)
    return CandidateResult(new_id, candidate_path, manifest_path, _sha_bytes(data), manifest,
                           verification)


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
