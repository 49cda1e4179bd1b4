"""Verification by code: re-read the candidate from disk and prove it against the manifest.

Never by asking the model. Every check that fails adds one sentence to `errors`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, ValidationError

from ..claude_code.record_shapes import ASSISTANT, USER
from ..conversation.records import MARKER, unwrap_snapshot, words_match
from ..transcript.reader import loads_line, text_bytes
from .manifest import (
    ItemKind,
    ManifestFormatError,
    ManifestHeader,
    ManifestItem,
    item_uuid,
    read_manifest,
    turn_message_id,
)

if TYPE_CHECKING:
    from ..plan import Plan

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


def _candidate_records(handle: BinaryIO, errors: list[str]) -> Iterator[dict[str, Any]]:
    """The candidate's records one line at a time; problems go to ERRORS."""
    for number, line in enumerate(handle, start=1):
        if not line.endswith(b"\n"):
            errors.append("the candidate does not end with a newline")
        try:
            record = loads_line(line)
        except ValueError:
            errors.append(f"line {number} is not JSON")
            continue
        if not isinstance(record, dict):
            errors.append(f"line {number} is not a JSON object")
            continue
        yield record


class _Check:
    """The checks of one record against its manifest item; keeps only what the next record
    needs (the previous id and time, the current turn's message)."""

    def __init__(self, session_id: str, errors: list[str]) -> None:
        self.session_id = session_id
        self.errors = errors
        self.previous_uuid: str | None = None
        self.previous_time: datetime | None = None
        self.last_type: object = None

    def record(self, record: dict[str, Any], item: ManifestItem) -> None:
        errors, session_id = self.errors, self.session_id
        where = f"record {item.position}"
        kind = record.get("type")
        self.last_type = kind
        if kind not in (USER, ASSISTANT) or kind != item.role:  # a tuple: KIND may be a list
            errors.append(f"{where} has type {kind!r}, expected {item.role!r}")
        record_id = record.get("uuid")
        # Ids are UUID v5 of (session, position, source): distinct positions cannot repeat one.
        expected_id = item_uuid(session_id, item.position, item.source_uuid)
        if record_id != item.uuid or record_id != expected_id:
            errors.append(f"{where} has uuid {record_id!r}, expected {expected_id}")
        if record.get("parentUuid") != self.previous_uuid:
            errors.append(f"{where} breaks the chain (parent {record.get('parentUuid')!r})")
        self.previous_uuid = str(record_id)
        if record.get("sessionId") != session_id:
            errors.append(f"{where} has sessionId {record.get('sessionId')!r}")
        if record.get("isSidechain") is not False:
            errors.append(f"{where} is not marked isSidechain:false")
        self.timestamp(where, record.get("timestamp"))
        text = _carried_text(record)
        if text is None:
            errors.append(f"{where} content is not a single text (user: string; assistant: "
                          "one text block)")
            return
        self.text(where, record, item, text)
        if kind == "assistant" and item.turn is not None:
            message_id = record.get("message", {}).get("id")
            if message_id != turn_message_id(session_id, item.turn):
                errors.append(f"{where} does not carry its turn's own message.id")

    def timestamp(self, where: str, stamp: object) -> None:
        try:
            moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            self.errors.append(f"{where} has an unparsable timestamp {stamp!r}")
            return
        if self.previous_time is not None and moment <= self.previous_time:
            self.errors.append(f"{where} timestamp does not increase")
        self.previous_time = moment

    def text(self, where: str, record: dict[str, Any], item: ManifestItem, text: str) -> None:
        marker = record.get(MARKER)
        prefix = marker.get("stampPrefix") if isinstance(marker, dict) else None
        if isinstance(prefix, str):
            if not text.startswith(prefix):
                self.errors.append(f"{where} lost its turn stamp prefix")
            text = text[len(prefix):]
        if item.kind is ItemKind.startup_snapshot:
            text = unwrap_snapshot(text)
        digest = _sha(text)
        if digest != item.carried_sha256:
            self.errors.append(f"{where} text digest differs from the manifest")
        if item.kind is not ItemKind.open_tail_marker and digest != item.source_sha256:
            self.errors.append(f"{where} is not verbatim: its digest differs from the source "
                               "speech")


def verify_candidate(candidate: Path, manifest_path: Path,
                     plan: Plan | None = None) -> Verification:
    """Check CANDIDATE against the manifest at MANIFEST_PATH (and PLAN, given), reading both
    files one record and one item at a time."""
    errors: list[str] = []
    walk = _Walk(_Check(candidate.stem, errors), _plan_speech(plan))
    try:
        header = walk.run(candidate, manifest_path)
    except OSError as exc:
        return Verification(ok=False, errors=[f"cannot read {exc.filename or manifest_path}: "
                                              f"{exc.strerror or exc}"], records_checked=0)
    except (ValidationError, ManifestFormatError) as exc:
        return Verification(ok=False, errors=[f"manifest unreadable: {exc}"], records_checked=0)
    if header is None:
        return Verification(ok=False, errors=["manifest unreadable: no header"],
                            records_checked=0)
    errors.extend(walk.whole(candidate, header, plan))
    return Verification(ok=not errors, errors=errors[:MAX_ERRORS], records_checked=walk.records)


_PLAN_DIFFERS = "the carried items differ from the plan's selected speech (order or digest)"


class _Walk:
    """The candidate's records and the manifest's items read side by side: their counts, the
    speech items carried, the plan's speech still expected."""

    def __init__(self, check: _Check, expected: Iterator[tuple[str, str]] | None) -> None:
        self.check = check
        self.expected = expected
        self.records = self.items = self.carried = 0

    def run(self, candidate: Path, manifest_path: Path) -> ManifestHeader | None:
        """Check every record against its item; the manifest's header (None without one)."""
        header: ManifestHeader | None = None
        with candidate.open("rb") as handle:
            lines = _candidate_records(handle, self.check.errors)
            for entry in read_manifest(manifest_path):
                if not isinstance(entry, ManifestItem):
                    header = entry
                    break
                self.item(entry, lines)
            self.records += sum(1 for _ in lines)
        return header

    def item(self, entry: ManifestItem, lines: Iterator[dict[str, Any]]) -> None:
        self.items += 1
        if entry.kind in (ItemKind.speech, ItemKind.compact_summary):
            self.carried += 1
            if self.expected is not None and not _same_speech(next(self.expected, None), entry):
                self.check.errors.append(_PLAN_DIFFERS)
                self.expected = None
        record = next(lines, None)
        if record is None:
            return
        self.records += 1
        if len(self.check.errors) < MAX_ERRORS:
            self.check.record(record, entry)

    def whole(self, candidate: Path, header: ManifestHeader, plan: Plan | None) -> list[str]:
        """What is wrong with the candidate as a whole, once every record was read."""
        problems = []
        if header.new_session_id != self.check.session_id:
            problems.append(f"file name {candidate.name} is not the session id "
                            f"{header.new_session_id}")
        if self.records != self.items:
            problems.append(f"{self.records} records but the manifest lists {self.items}")
        if self.records and self.check.last_type != "assistant":
            problems.append("the candidate does not end on an assistant record")
        problems.extend(_counts(header, self.carried))
        if self.expected is not None and next(self.expected, None) is not None:
            problems.append(_PLAN_DIFFERS)
        if plan is not None and plan.report.source_sha256 != header.source_sha256:
            problems.append("the manifest names another source digest than the plan")
        return problems


def _counts(header: ManifestHeader, carried: int) -> list[str]:
    counts = header.counts
    problems = []
    if carried != counts.carried_speech_items:
        problems.append(f"{carried} speech items carried, the manifest counts "
                        f"{counts.carried_speech_items}")
    missing = counts.source_speech_items - carried
    expected_missing = counts.dropped_by_budget_items + counts.dropped_open_tail_items
    if missing != expected_missing:
        problems.append(f"{missing} source speech items not carried, but only "
                        f"{expected_missing} were dropped by the budget or the open-tail setting")
    return problems


def _plan_speech(plan: Plan | None) -> Iterator[tuple[str, str]] | None:
    """The plan's selected speech, (source uuid, digest) in order: what must be carried."""
    if plan is None:
        return None
    return ((item.source_uuid, item.digest) for turn in plan.turns for item in turn.items)


def _same_speech(planned: tuple[str, str] | None, entry: ManifestItem) -> bool:
    """Whether manifest ENTRY is the PLANNED speech item (its uuid, its words' digest)."""
    return (planned is not None and entry.source_uuid == planned[0]
            and words_match(entry.source_sha256 or "", planned[1]))
