"""Write the candidate session (a strict linear chain of user/assistant records) and its manifest.

Layout decisions (see docs/candidate-format.md): user content is a string; each assistant item is
one record with one text block, and all assistant records of a turn share one `message.id` so
Claude Code sends them as one message; timestamps increase by 1 ms and end at write time; item
ids are UUID v5 of (new session id, position, source uuid).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Config
from ..conversation.records import MARKER, SOURCE_SESSION, Origin, Role, wrap_snapshot
from ..conversation.turns import Item
from ..fsutil import AtomicFile
from ..paths import MANIFEST_SUFFIX
from ..plan import Plan
from ..transcript.reader import dumps_line, text_bytes
from .manifest import (
    ItemKind,
    ManifestCounts,
    ManifestHeader,
    ManifestItem,
    ManifestWriter,
    item_uuid,
    turn_message_id,
)
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
    manifest: ManifestHeader
    items: int
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


def record_count(plan: Plan) -> int:
    """How many records the candidate of PLAN has (known before any is made: timestamps end at
    the time of writing)."""
    snapshot = int(plan.snapshot is not None)
    open_tail = int(bool(plan.turns) and plan.turns[-1].is_open)
    return snapshot + sum(len(turn.user) + len(turn.assistant) for turn in plan.turns) + open_tail


class _Builder:
    """Makes the records one at a time; only the previous record's id is kept."""

    def __init__(self, plan: Plan, config: Config, session_id: str, now: datetime) -> None:
        self.session_id = session_id
        self.source_session_id = plan.report.source_session_id
        self.cwd = str(config.claude_workdir) if config.claude_workdir else (plan.cwd or "")
        self.version = plan.report.claude_code_version or f"kael-thread-rebuild {__version__}"
        self.model = plan.model or "claude"
        self.count = record_count(plan)
        self.now = now
        self.position = 0
        self.previous: str | None = None

    def make(self, role: Role, content: str, kind: ItemKind, *, item: Item | None,
             turn: int | None, source_sha256: str | None, carried_sha256: str,
             marker: dict[str, Any], message_id: str | None = None,
             model: str | None = None) -> tuple[dict[str, Any], ManifestItem]:
        position = self.position
        source_uuid = item.source_uuid if item else marker.get("sourceUuid")
        record_id = item_uuid(self.session_id, position, source_uuid)
        moment = self.now - timedelta(milliseconds=self.count - position)
        record: dict[str, Any] = {
            "parentUuid": self.previous,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "type": role.value,
            "uuid": record_id,
            "timestamp": _iso(moment),
            MARKER: {"kind": kind.value, **marker},
        }
        if position == 0:  # the lineage: which session this one was rebuilt from
            record[MARKER][SOURCE_SESSION] = self.source_session_id
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
        self.position += 1
        self.previous = record_id
        return record, ManifestItem(
            position=position, uuid=record_id, role=role.value, kind=kind,
            origin=item.origin.value if item else None, turn=turn,
            source_uuid=source_uuid, source_line=item.source_line if item else None,
            source_timestamp=item.source_timestamp if item else None,
            source_sha256=source_sha256, carried_sha256=carried_sha256,
            stamp_prefix=marker.get("stampPrefix"),
        )


def iter_records(plan: Plan, config: Config, session_id: str,
                 now: datetime) -> Iterator[tuple[dict[str, Any], ManifestItem]]:
    """The candidate's records and their manifest items, in order, one at a time; the words
    are read back from the source as they are needed."""
    builder = _Builder(plan, config, session_id, now)
    snapshot = plan.snapshot
    if snapshot is not None:
        captured = snapshot.captured_at or ""
        yield builder.make(Role.user, wrap_snapshot(snapshot.text, captured, snapshot.sha256),
                           ItemKind.startup_snapshot, item=None, turn=None,
                           source_sha256=snapshot.sha256, carried_sha256=snapshot.sha256,
                           marker={"sourceUuid": snapshot.source_uuid, "capturedAt": captured,
                                   "sha256": snapshot.sha256})
    first_turn = plan.report.dropped_oldest_turns
    words = plan.iter_texts()
    for offset, turn in enumerate(plan.turns):
        number = first_turn + offset
        message_id = turn_message_id(session_id, number)
        for index, item in enumerate(turn.user):
            kind = (ItemKind.compact_summary if item.origin is Origin.compact_summary
                    else ItemKind.speech)
            marker: dict[str, Any] = {"origin": item.origin.value, "sourceUuid": item.source_uuid}
            prefix = _stamp(item.source_timestamp) if config.stamp_turns and index == 0 else None
            if prefix:
                marker["stampPrefix"] = prefix
            text = next(words)
            digest = _sha(text)  # the plan keeps only the start of it
            yield builder.make(Role.user, (prefix or "") + text, kind, item=item,
                               turn=number, source_sha256=digest,
                               carried_sha256=digest, marker=marker)
        for item in turn.assistant:
            text = next(words)
            digest = _sha(text)
            yield builder.make(Role.assistant, text, ItemKind.speech, item=item,
                               turn=number, source_sha256=digest,
                               carried_sha256=digest,
                               marker={"origin": item.origin.value,
                                       "sourceUuid": item.source_uuid},
                               message_id=message_id)
    if plan.turns and plan.turns[-1].is_open:
        yield builder.make(Role.assistant, OPEN_TAIL_NOTICE, ItemKind.open_tail_marker,
                           item=None, turn=None, source_sha256=None,
                           carried_sha256=_sha(OPEN_TAIL_NOTICE), marker={},
                           message_id="msg_kael_open_tail", model=SYNTHETIC_MODEL)


def _header(plan: Plan, new_id: str, candidate_path: Path, now: datetime) -> ManifestHeader:
    report = plan.report
    carried = sum(len(turn.user) + len(turn.assistant) for turn in plan.turns)
    dropped_by_budget = (report.source_speech_items - report.dropped_open_tail_items
                         - report.carried_speech_items)
    return ManifestHeader(
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
    )


def write_candidate(plan: Plan, output_dir: Path, config: Config, *,
                    manifest_dir: Path | None = None,
                    session_id: str | None = None) -> CandidateResult:
    """Write `<id>.jsonl` into OUTPUT_DIR and `<id>.manifest.json` into MANIFEST_DIR (default
    OUTPUT_DIR), atomically, 0600, never overwriting; then verify both from disk.

    Both files are written a record at a time and published together: when either cannot be
    written (disk full, I/O error: `StorageError`), neither is left behind.
    """
    new_id = session_id or str(uuid.uuid4())
    now = datetime.now(UTC)
    candidate_path = output_dir / f"{new_id}.jsonl"
    manifest_path = (manifest_dir or output_dir) / f"{new_id}{MANIFEST_SUFFIX}"
    header = _header(plan, new_id, candidate_path, now)
    digest = hashlib.sha256()
    candidate = AtomicFile(candidate_path, 0o600, overwrite=False)
    try:
        manifest = AtomicFile(manifest_path, 0o600, overwrite=False)
        try:
            items = ManifestWriter(manifest, header)
            for record, item in iter_records(plan, config, new_id, now):
                line = dumps_line(record) + b"\n"
                candidate.write(line)
                digest.update(line)
                items.add(item)
            items.finish()
            candidate.commit()
            try:
                manifest.commit()
            except BaseException:
                _remove(candidate_path)
                raise
        finally:
            manifest.discard()
    finally:
        candidate.discard()
    verification = verify_candidate(candidate_path, manifest_path, plan)
    return CandidateResult(new_id, candidate_path, manifest_path, digest.hexdigest(), header,
                           items.count, verification)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
