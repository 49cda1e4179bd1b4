"""A compact table of every chain record: links, kinds and times in flat arrays.

A transcript of a gigabyte holds a hundred thousand chain records; keeping one Python object
per record would make memory grow with the file. Rows are numbered in file order; parents are
resolved to rows as records arrive, and the few forward or missing references are kept apart.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum

NO_PARENT = -1
UNRESOLVED = -2


class Kind(IntEnum):
    other = 0
    user = 1
    assistant = 2
    attachment = 3
    system = 4


KINDS = {"user": Kind.user, "assistant": Kind.assistant, "attachment": Kind.attachment,
         "system": Kind.system}

SIDECHAIN = 1
BOUNDARY = 2
TOOL_RESULT = 4


def epoch_ms(timestamp: object) -> float:
    if not isinstance(timestamp, str):
        return float("nan")
    try:
        return datetime.fromisoformat(timestamp).timestamp() * 1000
    except ValueError:
        return float("nan")


@dataclass(slots=True)
class RecordTable:
    rows: dict[str, int] = field(default_factory=dict)
    kinds: bytearray = field(default_factory=bytearray)
    flags: bytearray = field(default_factory=bytearray)
    parents: array[int] = field(default_factory=lambda: array("q"))
    times: array[float] = field(default_factory=lambda: array("d"))
    lines: array[int] = field(default_factory=lambda: array("q"))
    messages: array[int] = field(default_factory=lambda: array("q"))
    message_codes: dict[str, int] = field(default_factory=dict)
    # The rows of each API message, in file order (index: message code): parallel tool calls
    # leave some of them off the walked path, and they are found here without a full scan.
    message_rows: list[list[int]] = field(default_factory=list)
    pending_parents: dict[int, str] = field(default_factory=dict)
    logical_parents: dict[int, str] = field(default_factory=dict)
    superseded: dict[int, int] = field(default_factory=dict)

    def add(self, uuid: str, kind: Kind, flags: int, parent: object, timestamp: object,
            line: int, message_id: object = None) -> int:
        row = len(self.kinds)
        previous = self.rows.get(uuid)
        if previous is not None:
            self.superseded[previous] = row
        self.rows[uuid] = row
        self.kinds.append(kind)
        self.flags.append(flags)
        if isinstance(parent, str):
            parent_row = self.rows.get(parent)
            if parent_row is None or parent_row == row:
                self.pending_parents[row] = parent
                parent_row = UNRESOLVED
            self.parents.append(parent_row)
        else:
            self.parents.append(NO_PARENT)
        self.times.append(epoch_ms(timestamp))
        self.lines.append(line)
        if isinstance(message_id, str):
            code = self.message_codes.setdefault(message_id, len(self.message_codes))
            if code == len(self.message_rows):
                self.message_rows.append([])
            self.message_rows[code].append(row)
            self.messages.append(code)
        else:
            self.messages.append(-1)
        return row

    def __len__(self) -> int:
        return len(self.kinds)

    def current(self, row: int) -> int:
        """The row that now holds ROW's uuid (a later record with the same uuid wins)."""
        while row in self.superseded:
            row = self.superseded[row]
        return row

    def live(self, row: int) -> bool:
        return row not in self.superseded and not self.flags[row] & SIDECHAIN

    def parent_of(self, row: int) -> int | None:
        """The parent row, NO_PARENT for a root, or None when the parent is not in the file."""
        parent = self.parents[row]
        if parent == UNRESOLVED:
            found = self.rows.get(self.pending_parents[row])
            return None if found is None else self.current(found)
        return parent if parent == NO_PARENT else self.current(parent)

    def logical_parent_of(self, row: int) -> int | None:
        uuid = self.logical_parents.get(row)
        found = self.rows.get(uuid) if uuid is not None else None
        return None if found is None else self.current(found)

    def absorb(self, later: RecordTable, line_offset: int) -> int:
        """Append the table of the byte range read right after this one; returns the row offset.

        Uuids seen in both ranges follow the same rule as within one range: the later wins.
        """
        offset = len(self)
        self.kinds.extend(later.kinds)
        self.flags.extend(later.flags)
        self.parents.extend(p + offset if p >= 0 else p for p in later.parents)
        self.times.extend(later.times)
        self.lines.extend(line + line_offset for line in later.lines)
        codes = {code: self.message_codes.setdefault(message, len(self.message_codes))
                 for message, code in later.message_codes.items()}
        self.messages.extend(codes[code] if code >= 0 else -1 for code in later.messages)
        for code, rows in enumerate(later.message_rows):
            merged = codes[code]
            if merged == len(self.message_rows):
                self.message_rows.append([])
            self.message_rows[merged].extend(row + offset for row in rows)
        self.pending_parents.update((row + offset, u) for row, u in later.pending_parents.items())
        self.logical_parents.update((row + offset, u) for row, u in later.logical_parents.items())
        self.superseded.update((old + offset, new + offset)
                               for old, new in later.superseded.items())
        for uuid, row in later.rows.items():
            previous = self.rows.get(uuid)
            if previous is not None and previous < offset:
                self.superseded[previous] = _first_row(later, uuid) + offset
            self.rows[uuid] = row + offset
        return offset


def _first_row(table: RecordTable, uuid: str) -> int:
    """The earliest row of UUID in TABLE (its later rows are chained by `superseded`)."""
    row = table.rows[uuid]
    earlier = {new: old for old, new in table.superseded.items()}
    while row in earlier:
        row = earlier[row]
    return row
