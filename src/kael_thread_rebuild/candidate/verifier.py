"""Verification by code: re-read the candidate from disk and prove it against the manifest.

Never by asking the model. Every check that fails adds one sentence to `errors`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..conversation.records import MARKER, unwrap_snapshot
from ..transcript.reader import loads_line, text_bytes
from .manifest import ItemKind, Manifest, item_uuid

if TYPE_CHECKING:
    from ..plan import Plan

ALLOWED_TOP_LEVEL_TYPES = ("user", "assistant")
MAX_ERRORS = 50


class Verification(BaseModel):
    ok: bool
    errors: list[str]
    records_checked: int


def _sha(text: str) -> str:
    return hashlib.sha256(text_bytes(text)).hexdigest()


def _carried_text(record: dict[str, Any]) -> str | None:
    """The item's text as carried (user: the string; assistant: the one text block)."""
    content = record.get("message", {}).get("content")
    if record.get("type") == "user":
        return content if isinstance(content, str) else None
    if (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)
            and content[0].get("type") == "text" and isinstance(content[0].get("text"), str)):
        return str(content[0]["text"])
    return None


def _load(candidate: Path) -> tuple[list[dict[str, Any]], list[str]]:
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    raw = candidate.read_bytes()
    if raw and not raw.endswith(b"\n"):
        errors.append("the candidate does not end with a newline")
    for number, line in enumerate(raw.splitlines(), start=1):
        try:
            record = loads_line(line)
        except ValueError:
            errors.append(f"line {number} is not JSON")
            continue
        if not isinstance(record, dict):
            errors.append(f"line {number} is not a JSON object")
            continue
        records.append(record)
    return records, errors


def verify_candidate(candidate: Path, manifest_path: Path,
                     plan: Plan | None = None) -> Verification:
    try:
        manifest = Manifest.model_validate_json(manifest_path.read_bytes())
    except (OSError, ValidationError) as exc:
        return Verification(ok=False, errors=[f"manifest unreadable: {exc}"], records_checked=0)
    records, errors = _load(candidate)
    session_id = manifest.new_session_id
    if candidate.stem != session_id:
        errors.append(f"file name {candidate.name} is not the session id {session_id}")
    if len(records) != len(manifest.items):
        errors.append(f"{len(records)} records but the manifest lists {len(manifest.items)}")
    previous_uuid: str | None = None
    previous_time: datetime | None = None
    seen: set[str] = set()
    turn_message: dict[int, str] = {}
    message_turn: dict[str, int] = {}
    for record, item in zip(records, manifest.items, strict=False):
        where = f"record {item.position}"
        kind = record.get("type")
        if kind not in ALLOWED_TOP_LEVEL_TYPES or kind != item.role:
            errors.append(f"{where} has type {kind!r}, expected {item.role!r}")
        record_id = record.get("uuid")
        expected_id = item_uuid(session_id, item.position, item.source_uuid)
        if record_id != item.uuid or record_id != expected_id:
            errors.append(f"{where} has uuid {record_id!r}, expected {expected_id}")
        if record_id in seen:
            errors.append(f"{where} repeats uuid {record_id}")
        seen.add(str(record_id))
        if record.get("parentUuid") != previous_uuid:
            errors.append(f"{where} breaks the chain (parent {record.get('parentUuid')!r})")
        previous_uuid = str(record_id)
        if record.get("sessionId") != session_id:
            errors.append(f"{where} has sessionId {record.get('sessionId')!r}")
        if record.get("isSidechain") is not False:
            errors.append(f"{where} is not marked isSidechain:false")
        stamp = record.get("timestamp")
        try:
            moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            errors.append(f"{where} has an unparsable timestamp {stamp!r}")
        else:
            if previous_time is not None and moment <= previous_time:
                errors.append(f"{where} timestamp does not increase")
            previous_time = moment
        text = _carried_text(record)
        if text is None:
            errors.append(f"{where} content is not a single text (user: string; assistant: "
                          "one text block)")
            continue
        marker = record.get(MARKER)
        prefix = marker.get("stampPrefix") if isinstance(marker, dict) else None
        if isinstance(prefix, str):
            if not text.startswith(prefix):
                errors.append(f"{where} lost its turn stamp prefix")
            text = text[len(prefix):]
        if item.kind is ItemKind.startup_snapshot:
            text = unwrap_snapshot(text)
        digest = _sha(text)
        if digest != item.carried_sha256:
            errors.append(f"{where} text digest differs from the manifest")
        if item.kind is not ItemKind.open_tail_marker and digest != item.source_sha256:
            errors.append(f"{where} is not verbatim: its digest differs from the source speech")
        if kind == "assistant" and item.turn is not None:
            message_id = str(record.get("message", {}).get("id"))
            if turn_message.setdefault(item.turn, message_id) != message_id:
                errors.append(f"{where} does not share its turn's message.id")
            if message_turn.setdefault(message_id, item.turn) != item.turn:
                errors.append(f"{where} shares a message.id with another turn")
        if len(errors) >= MAX_ERRORS:
            break
    counts = manifest.counts
    if records and records[-1].get("type") != "assistant":
        errors.append("the candidate does not end on an assistant record")
    carried = sum(1 for i in manifest.items
                  if i.kind in (ItemKind.speech, ItemKind.compact_summary))
    if carried != counts.carried_speech_items:
        errors.append(f"{carried} speech items carried, the manifest counts "
                      f"{counts.carried_speech_items}")
    missing = counts.source_speech_items - carried
    expected_missing = counts.dropped_by_budget_items + counts.dropped_open_tail_items
    if missing != expected_missing:
        errors.append(f"{missing} source speech items not carried, but only {expected_missing} "
                      "were dropped by the budget or the open-tail setting")
    if plan is not None:
        errors.extend(_against_plan(manifest, plan))
    return Verification(ok=not errors, errors=errors[:MAX_ERRORS], records_checked=len(records))


def _against_plan(manifest: Manifest, plan: Plan) -> list[str]:
    """Each carried item must match, in order, the plan's source speech digests."""
    expected = [(item.source_uuid, item.sha256) for turn in plan.turns for item in turn.items]
    carried = [(item.source_uuid, item.source_sha256) for item in manifest.items
               if item.kind in (ItemKind.speech, ItemKind.compact_summary)]
    if carried != expected:
        return ["the carried items differ from the plan's selected speech (order or digest)"]
    if plan.report.source_sha256 != manifest.source_sha256:
        return ["the manifest names another source digest than the plan"]
    return []
