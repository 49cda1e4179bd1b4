"""The manifest: per carried item, where it came from and the digests that prove it verbatim.

It holds digests, positions and ids only, never conversation text. A session of a million
messages has a million items, so the manifest is written and read one item at a time
(`ManifestWriter`, `read_manifest`): the file is the same JSON `atomic_write_json` would write
for the whole `Manifest` (sorted keys, indented by two).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import orjson
from pydantic import BaseModel

from ..fsutil import AtomicFile

_DUMP = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
_EMPTY_ITEMS = b'"items": []'
_READ_CHUNK = 1 << 20


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


class ManifestHeader(BaseModel):
    """Everything of the manifest but its items."""

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


class Manifest(ManifestHeader):
    items: list[ManifestItem]


def item_uuid(session_id: str, position: int, source_uuid: str | None) -> str:
    """Deterministic item id: UUID v5 of (new session id, position, source uuid)."""
    return str(uuid.uuid5(uuid.UUID(session_id), f"{position}:{source_uuid or ''}"))


def turn_message_id(session_id: str, turn: int) -> str:
    """The `message.id` shared by the assistant records of one turn."""
    return "msg_kael_" + uuid.uuid5(uuid.UUID(session_id), f"turn:{turn}").hex[:24]


class ManifestWriter:
    """Writes HEADER and then the items handed to `add`, into an `AtomicFile`."""

    def __init__(self, target: AtomicFile, header: ManifestHeader) -> None:
        self.target = target
        self.count = 0
        whole = orjson.dumps({**header.model_dump(mode="json"), "items": []}, option=_DUMP)
        self.head, self.tail = whole.split(_EMPTY_ITEMS)

    def add(self, item: ManifestItem) -> None:
        data = orjson.dumps(item.model_dump(mode="json"), option=_DUMP)
        opening = b'"items": [\n    ' if self.count == 0 else b",\n    "
        if self.count == 0:
            self.target.write(self.head)
        self.target.write(opening + data.replace(b"\n", b"\n    "))
        self.count += 1

    def finish(self) -> None:
        if self.count == 0:
            self.target.write(self.head + _EMPTY_ITEMS)
        else:
            self.target.write(b"\n  ]")
        self.target.write(self.tail + b"\n")


class ManifestFormatError(ValueError):
    """The manifest is not the JSON object it should be."""


class _JsonStream:
    """Reads one JSON object from a text file value by value, never the whole file."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle
        self.buffer = ""
        self.position = 0
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        chunk = self.handle.read(_READ_CHUNK)
        self.buffer = self.buffer[self.position:] + chunk
        self.position = 0
        return bool(chunk)

    def peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            buffer, position = self.buffer, self.position
            while position < len(buffer) and buffer[position] in " \t\r\n":
                position += 1
            self.position = position
            if position < len(buffer) or not self._more():
                return self.buffer[self.position:self.position + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ManifestFormatError(f"expected {char!r} in the manifest")
        self.position += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                found, end = self.decoder.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError:
                found, end = None, -1
            # A number cut by the end of the buffer would decode short: wait for what follows.
            if end != -1 and end < len(self.buffer):
                self.position = end
                return found
            if not self._more():
                if end != -1:
                    self.position = end
                    return found
                raise ManifestFormatError("the manifest is not valid JSON")


def _members(stream: _JsonStream) -> Iterator[str]:
    """The keys of an object, leaving the stream before each value."""
    stream.expect("{")
    if stream.peek() == "}":
        stream.position += 1
        return
    while True:
        key = stream.value()
        if not isinstance(key, str):
            raise ManifestFormatError("a manifest key is not a string")
        stream.expect(":")
        yield key
        if stream.peek() == ",":
            stream.position += 1
            continue
        stream.expect("}")
        return


def read_manifest(path: Path) -> Iterator[ManifestItem | ManifestHeader]:
    """The items of the manifest at PATH one by one, then its header (raises OSError,
    ManifestFormatError or pydantic's ValidationError)."""
    header: dict[str, Any] = {}
    with path.open(encoding="utf-8") as handle:
        stream = _JsonStream(handle)
        for key in _members(stream):
            if key != "items":
                header[key] = stream.value()
                continue
            stream.expect("[")
            if stream.peek() == "]":
                stream.position += 1
                continue
            while True:
                yield ManifestItem.model_validate(stream.value())
                if stream.peek() == ",":
                    stream.position += 1
                    continue
                stream.expect("]")
                break
        if stream.peek():
            raise ManifestFormatError("the manifest has more after its object")
    yield ManifestHeader.model_validate(header)
