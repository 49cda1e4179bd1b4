"""A compact table of every chain record: links, kinds and times in flat arrays.

A transcript of a gigabyte holds a hundred thousand chain records; keeping one Python object
per record would make memory grow with the file. Rows are numbered in file order; parents are
resolved to rows as records arrive (kept as the distance back, a byte for most records), and the
few forward or missing references are kept apart.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum
from hashlib import blake2b

from ..claude_code.record_shapes import ASSISTANT, ATTACHMENT, SYSTEM, USER
from ..transcript.reader import text_bytes
from .arrays import IdentityArray, append_signed, extend_signed
from .interner import EMPTY, Interner

NO_PARENT = -1
UNRESOLVED = -2
# How `RecordTable.parents` keeps them: a resolved parent as its distance back (1 or more).
ROOT_DISTANCE = 0
UNRESOLVED_DISTANCE = -1


class Kind(IntEnum):
    other = 0
    user = 1
    assistant = 2
    attachment = 3
    system = 4


KINDS = {USER: Kind.user, ASSISTANT: Kind.assistant, ATTACHMENT: Kind.attachment,
         SYSTEM: Kind.system}

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


MESSAGE_KEY_BYTES = 12


def key_of(text: str) -> bytes:
    """The bytes a message id is interned by: a 96-bit BLAKE2b digest of its exact bytes (lone
    surrogates included). Ids are only compared, never shown; two of a session's ids meeting
    by chance is less likely than 1 in 10**16 for a million of them."""
    return blake2b(text_bytes(text), digest_size=MESSAGE_KEY_BYTES).digest()


UUID_BYTES = 16


def uuid_key(text: str) -> bytes:
    """The bytes a uuid is interned by: its 16 raw bytes when it is written the canonical way
    (lowercase, dashed), else its own bytes, never 16 long (so the two never meet)."""
    if len(text) == 36 and text[8] == text[13] == text[18] == text[23] == "-":
        digits = text.replace("-", "")
        try:
            raw = bytes.fromhex(digits)
        except ValueError:
            raw = b""
        if len(raw) == UUID_BYTES and raw.hex() == digits:
            return raw
    data = text_bytes(text)
    return data + b"\xff" if len(data) == UUID_BYTES else data  # 0xff is never in UTF-8


def uuid_text(key: bytes) -> str:
    """The uuid a key of `uuid_key` was made from."""
    if len(key) == UUID_BYTES:
        h = key.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if len(key) == 17 and key[-1] == 0xFF:
        key = key[:-1]
    return key.decode("utf-8", "surrogatepass")


@dataclass(slots=True)
class RecordTable:
    # Uuids interned to codes; each row's code, and the row that now holds each code (both the
    # row itself until a uuid comes twice).
    uuids: Interner = field(default_factory=lambda: Interner(UUID_BYTES))
    row_codes: IdentityArray = field(default_factory=IdentityArray)
    code_rows: IdentityArray = field(default_factory=IdentityArray)
    kinds: bytearray = field(default_factory=bytearray)
    flags: bytearray = field(default_factory=bytearray)
    # Each row's parent as the distance back to it (see ROOT_DISTANCE; `parent_row`).
    parents: array[int] = field(default_factory=lambda: array("b"))
    times: array[float] = field(default_factory=lambda: array("d"))
    # Each row's line: free while every line is a record (line i + 1 at row i).
    lines: IdentityArray = field(default_factory=lambda: IdentityArray(1))
    messages: array[int] = field(default_factory=lambda: array("i"))
    message_ids: Interner = field(default_factory=lambda: Interner(MESSAGE_KEY_BYTES))
    # The rows of each API message: parallel tool calls leave some of them off the walked
    # path, and they are found here without a full scan. Its last row, and each row's distance
    # back to the one before it in the same message (0: the first; rows past the end of
    # `message_previous`, or all of them while it is None, are firsts): a chain, not a list per
    # message (a 4 GiB session has a hundred thousand messages of several records).
    message_last: array[int] = field(default_factory=lambda: array("i"))
    message_previous: array[int] | None = None
    pending_parents: dict[int, str] = field(default_factory=dict)
    logical_parents: dict[int, str] = field(default_factory=dict)
    superseded: dict[int, int] = field(default_factory=dict)
    # The uuid of the last row added: most records hang under the record written just before,
    # and comparing two strings is cheaper than a lookup.
    last_uuid: str | None = None
    # The rows `row_of` found for the uuids of `pending_parents` and `logical_parents` when the
    # lookup tables were let go of (`release_lookups`); emptied by the next `add`.
    found: dict[str, int | None] = field(default_factory=dict)

    def add(self, uuid: str, kind: Kind, flags: int, parent: object, timestamp: object,
            line: int, message_id: object = None) -> int:
        row = len(self.kinds)
        if self.found:
            self.found = {}
        self._hold(self.uuids.add(uuid_key(uuid)), row, 0)
        self.kinds.append(kind)
        self.flags.append(flags)
        if isinstance(parent, str):
            if parent == self.last_uuid and parent != uuid:
                distance = 1
            else:
                parent_row = self.row_of(parent)
                if parent_row is None or parent_row == row:
                    self.pending_parents[row] = parent
                    distance = UNRESOLVED_DISTANCE
                else:
                    distance = row - parent_row
            self.parents = append_signed(self.parents, distance)
        else:
            self.parents.append(ROOT_DISTANCE)
        self.last_uuid = uuid
        self.times.append(epoch_ms(timestamp))
        self.lines.append(line)
        if isinstance(message_id, str):
            code = self.message_ids.add(key_of(message_id))
            self._note_message(code, row)
            self.messages.append(code)
        else:
            self.messages.append(-1)
        return row

    def _hold(self, code: int, row: int, earlier_than: int) -> None:
        """Row ROW now holds uuid CODE; a row before EARLIER_THAN that held it is superseded."""
        self.row_codes.append(code)
        if code == len(self.code_rows):
            self.code_rows.append(row)
            return
        previous = self.code_rows[code]
        if previous >= earlier_than:
            self.superseded[previous] = row
        self.code_rows[code] = row

    def _note_message(self, code: int, row: int) -> None:
        last = self.message_last
        if code == len(last):
            last.append(row)
            return
        previous = self.message_previous
        if previous is None:
            previous = array("b")
        if len(previous) < row:  # the rows in between are firsts
            previous.frombytes(bytes((row - len(previous)) * previous.itemsize))
        self.message_previous = append_signed(previous, row - last[code])
        last[code] = row

    def _previous_in_message(self, row: int) -> int:
        previous = self.message_previous
        return 0 if previous is None or row >= len(previous) else previous[row]

    def message_has_more(self, code: int) -> bool:
        """Whether API message CODE has more than one row."""
        return self._previous_in_message(self.message_last[code]) != 0

    def __len__(self) -> int:
        return len(self.kinds)

    def row_of(self, uuid: str) -> int | None:
        """The row that now holds UUID, or None when no record has it."""
        if uuid in self.found:
            return self.found[uuid]
        code = self.uuids.find(uuid_key(uuid))
        return None if code == EMPTY else self.code_rows[code]

    def release_lookups(self) -> None:
        """Let go of the hash tables of uuids and message ids once every record is in (the
        branch walk looks up only the uuids of unresolved and logical parents: their rows are
        kept). A later `add` or lookup builds them again."""
        wanted = {*self.pending_parents.values(), *self.logical_parents.values()}
        found = {uuid: self.row_of(uuid) for uuid in wanted}
        self.uuids.release()
        self.message_ids.release()
        self.found = found

    def uuid_of(self, row: int) -> str:
        return uuid_text(self.uuids.key(self.row_codes[row]))

    def message_members(self, code: int) -> list[int]:
        """The rows of API message CODE, in file order."""
        row = self.message_last[code]
        rows = [row]
        while distance := self._previous_in_message(row):
            row -= distance
            rows.append(row)
        rows.reverse()
        return rows

    def current(self, row: int) -> int:
        """The row that now holds ROW's uuid (a later record with the same uuid wins)."""
        while row in self.superseded:
            row = self.superseded[row]
        return row

    def live(self, row: int) -> bool:
        return row not in self.superseded and not self.flags[row] & SIDECHAIN

    def parent_row(self, row: int) -> int:
        """The row the parent link of ROW pointed at when it was read, NO_PARENT for a root, or
        UNRESOLVED (its uuid is in `pending_parents`)."""
        distance = self.parents[row]
        if distance > 0:
            return row - distance
        return NO_PARENT if distance == ROOT_DISTANCE else UNRESOLVED

    def is_root(self, row: int) -> bool:
        """Whether ROW has no parent link at all (`parentUuid` null or absent)."""
        return self.parents[row] == ROOT_DISTANCE

    def parent_of(self, row: int) -> int | None:
        """The parent row, NO_PARENT for a root, or None when the parent is not in the file."""
        parent = self.parent_row(row)
        if parent == UNRESOLVED:
            found = self.row_of(self.pending_parents[row])
            return None if found is None else self.current(found)
        return parent if parent == NO_PARENT else self.current(parent)

    def logical_parent_of(self, row: int) -> int | None:
        uuid = self.logical_parents.get(row)
        found = self.row_of(uuid) if uuid is not None else None
        return None if found is None else self.current(found)

    def absorb(self, later: RecordTable, line_offset: int) -> int:
        """Append the table of the byte range read right after this one; returns the row offset.

        Uuids seen in both ranges follow the same rule as within one range: the later wins.
        """
        offset = len(self)
        self.last_uuid = None
        self.kinds.extend(later.kinds)
        self.flags.extend(later.flags)
        self.found = {}
        self.parents = extend_signed(self.parents, later.parents)  # distances: no offset
        self.times.extend(later.times)
        self.lines.extend_shifted(later.lines, line_offset)
        uuid_codes = array("i", (self.uuids.add(later.uuids.key(code))
                                 for code in range(len(later.uuids))))
        for row, code in enumerate(later.row_codes):
            self._hold(uuid_codes[code], row + offset, offset)
        message_codes = array("i", (self.message_ids.add(later.message_ids.key(code))
                                    for code in range(len(later.message_ids))))
        for row, code in enumerate(later.messages):
            if code >= 0:
                code = message_codes[code]
                self._note_message(code, row + offset)
            self.messages.append(code)
        self.pending_parents.update((row + offset, u) for row, u in later.pending_parents.items())
        self.logical_parents.update((row + offset, u) for row, u in later.logical_parents.items())
        self.superseded.update((old + offset, new + offset)
                               for old, new in later.superseded.items())
        return offset
