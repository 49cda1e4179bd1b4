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
from .arrays import IdentityArray, TimeArray, append_signed, extend_signed, padded, put_signed
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
    """TIMESTAMP in milliseconds since the epoch, NaN when there is none; a whole number for a
    timestamp in whole milliseconds (as Claude Code writes them: the float product of seconds
    and 1000 can be off by a hair)."""
    if not isinstance(timestamp, str):
        return float("nan")
    try:
        exact = datetime.fromisoformat(timestamp).timestamp() * 1000
    except ValueError:
        return float("nan")
    whole = round(exact)
    return float(whole) if abs(exact - whole) < 1e-3 else exact


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


def _chained(row: int) -> int:
    """The parent distance of ROW in a table whose first row is a root and every other row
    hangs under the row before it."""
    return ROOT_DISTANCE if row == 0 else 1


def _distance(values: array[int] | None, row: int) -> int:
    return 0 if values is None or row >= len(values) else values[row]


@dataclass(slots=True)
class RecordTable:
    # Uuids interned to codes; each row's code, and the row that now holds each code (both the
    # row itself until a uuid comes twice).
    uuids: Interner = field(default_factory=lambda: Interner(UUID_BYTES))
    row_codes: IdentityArray = field(default_factory=IdentityArray)
    code_rows: IdentityArray = field(default_factory=IdentityArray)
    kinds: bytearray = field(default_factory=bytearray)
    flags: bytearray = field(default_factory=bytearray)
    # Each row's parent as the distance back to it (see ROOT_DISTANCE; `parent_row`); None
    # while each is `_chained` (a chat).
    parents: array[int] | None = None
    times: TimeArray = field(default_factory=TimeArray)
    # Each row's line: free while every line is a record (line i + 1 at row i).
    lines: IdentityArray = field(default_factory=lambda: IdentityArray(1))
    message_ids: Interner = field(default_factory=lambda: Interner(MESSAGE_KEY_BYTES))
    # The rows of each API message: parallel tool calls leave some of them off the walked
    # path, and they are found here without a full scan. Each row's distance back to the row
    # before it in the same message and on to the row after it (0: none; so for a row past the
    # end of an array, or for all while it is None, as in a chat of one record a message): a
    # chain, not a list per message (a 4 GiB session has a hundred thousand messages of several
    # records), and no message code per row. While reading: each message's last row.
    message_last: array[int] = field(default_factory=lambda: array("i"))
    message_previous: array[int] | None = None
    message_next: array[int] | None = None
    pending_parents: dict[int, str] = field(default_factory=dict)
    logical_parents: dict[int, str] = field(default_factory=dict)
    superseded: dict[int, int] = field(default_factory=dict)
    # The uuid of the last row added: most records hang under the record written just before,
    # and comparing two strings is cheaper than a lookup.
    last_uuid: str | None = None
    # The rows `row_of` found for the uuids of `pending_parents` and `logical_parents` when the
    # lookup tables were let go of (`release_lookups`); emptied by the next `add`.
    found: dict[str, int | None] = field(default_factory=dict)
    # The message id of the last row added with one and its code: a message's rows mostly come
    # one after another, and comparing two strings is cheaper than digesting and interning.
    last_message: tuple[str, int] | None = None

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
        else:
            distance = ROOT_DISTANCE
        if self.parents is not None or distance != _chained(row):
            self.parents = append_signed(self._real_parents(row), distance)
        self.last_uuid = uuid
        self.times.append(epoch_ms(timestamp))
        self.lines.append(line)
        if isinstance(message_id, str):
            last = self.last_message
            if last is not None and last[0] == message_id:
                code = last[1]
            else:
                code = self.message_ids.add(key_of(message_id))
                self.last_message = message_id, code
            self._note_message(code, row)
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
        self._link_message(last[code], row)
        last[code] = row

    def _link_message(self, before: int, row: int) -> None:
        """Rows BEFORE and ROW are consecutive rows of one message."""
        self.message_previous = put_signed(self.message_previous, row, row - before)
        self.message_next = put_signed(self.message_next, before, row - before)

    def shares_message(self, row: int) -> bool:
        """Whether ROW's API message has other rows."""
        return bool(_distance(self.message_previous, row) or _distance(self.message_next, row))

    def message_first(self, row: int) -> int:
        """The first row of ROW's API message (ROW itself when it has no message)."""
        while distance := _distance(self.message_previous, row):
            row -= distance
        return row

    def message_rows(self, row: int) -> list[int]:
        """The rows of ROW's API message, in file order."""
        row = self.message_first(row)
        rows = [row]
        while distance := _distance(self.message_next, row):
            row += distance
            rows.append(row)
        return rows

    def __len__(self) -> int:
        return len(self.kinds)

    def row_of(self, uuid: str) -> int | None:
        """The row that now holds UUID, or None when no record has it."""
        if uuid in self.found:
            return self.found[uuid]
        code = self.uuids.find(uuid_key(uuid))
        return None if code == EMPTY else self.code_rows[code]

    def reserve(self, records: int) -> None:
        """Make the lookup tables at once for about RECORDS records in all (an API message
        spans several records: a fourth as many message ids)."""
        self.uuids.reserve(records)
        self.message_ids.reserve(records // 4)

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

    def current(self, row: int) -> int:
        """The row that now holds ROW's uuid (a later record with the same uuid wins)."""
        while row in self.superseded:
            row = self.superseded[row]
        return row

    def live(self, row: int) -> bool:
        return row not in self.superseded and not self.flags[row] & SIDECHAIN

    def _real_parents(self, rows: int) -> array[int]:
        """The parents of the first ROWS rows, as an array (made when one is not `_chained`)."""
        if self.parents is None:
            self.parents = array("b", [1]) * rows
            if rows:
                self.parents[0] = _chained(0)
        return self.parents

    def _distance_back(self, row: int) -> int:
        if self.parents is not None:
            return self.parents[row]
        if not 0 <= row < len(self):
            raise IndexError("no such row")
        return _chained(row)

    def parent_row(self, row: int) -> int:
        """The row the parent link of ROW pointed at when it was read, NO_PARENT for a root, or
        UNRESOLVED (its uuid is in `pending_parents`)."""
        distance = self._distance_back(row)
        if distance > 0:
            return row - distance
        return NO_PARENT if distance == ROOT_DISTANCE else UNRESOLVED

    def is_root(self, row: int) -> bool:
        """Whether ROW has no parent link at all (`parentUuid` null or absent)."""
        return self._distance_back(row) == ROOT_DISTANCE

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
        # LATER's first row is a root or unresolved in its own table: joined, the rows are
        # no longer a plain chain.
        if len(later) > 0:
            self.parents = extend_signed(self._real_parents(offset),  # distances: no offset
                                         later._real_parents(len(later)))
        self.times.extend(later.times)
        self.lines.extend_shifted(later.lines, line_offset)
        uuid_codes = self.uuids.add_all(later.uuids)
        if isinstance(uuid_codes, range):  # every uuid of LATER's is new here: shifted, its own
            self.row_codes.extend_shifted(later.row_codes, uuid_codes.start)
            self.code_rows.extend_shifted(later.code_rows, offset)
        else:
            for row, code in enumerate(later.row_codes):
                self._hold(uuid_codes[code], row + offset, offset)
        self._absorb_messages(later, offset)
        self.pending_parents.update((row + offset, u) for row, u in later.pending_parents.items())
        self.logical_parents.update((row + offset, u) for row, u in later.logical_parents.items())
        self.superseded.update((old + offset, new + offset)
                               for old, new in later.superseded.items())
        return offset

    def _absorb_messages(self, later: RecordTable, offset: int) -> None:
        """The messages of LATER, whose rows start at OFFSET: its chains carry over (they are
        distances); a message this table had already goes on from its last row here."""
        if later.message_previous is not None:
            self.message_previous = extend_signed(padded(self.message_previous, offset),
                                                  padded(later.message_previous, len(later)))
            self.message_next = extend_signed(padded(self.message_next, offset),
                                              padded(later.message_next, len(later)))
        known = len(self.message_last)
        codes = self.message_ids.add_all(later.message_ids)
        if isinstance(codes, range):  # no message of LATER's was here: its last rows, shifted
            self.message_last.extend(map(offset.__add__, later.message_last))
            return
        for code, own in enumerate(codes):
            last = later.message_last[code] + offset
            if own < known:
                self._link_message(self.message_last[own],
                                   later.message_first(later.message_last[code]) + offset)
                self.message_last[own] = last
            else:
                self.message_last.append(last)
