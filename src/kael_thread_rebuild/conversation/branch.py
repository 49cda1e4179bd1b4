"""The active branch: the records the session itself sees, walked the way Claude Code walks them.

Leaf = the last user/assistant record in file order; walk `parentUuid` back; cross a compaction
boundary through `logicalParentUuid` (or the record just before the boundary, since that uuid is
usually a phantom); bridge a missing parent to the newest earlier record at most 5 s older.
Parallel tool calls branch the graph, so assistant records of an on-branch API message that sit
off the walked path are recovered by `message.id`, and tool results that hold speech (an
advisor's answer) hanging off an on-branch record by their parent.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress

from .table import BOUNDARY, NO_PARENT, SIDECHAIN, TOOL_RESULT, Kind, RecordTable

BRIDGE_MS = 5000.0
# Plain ints: these loops run over every record of a large file.
CONVERSATION = frozenset({int(Kind.user), int(Kind.assistant)})
ASSISTANT = int(Kind.assistant)


class RowSet:
    """A set of table rows as one byte per row: a million-record session must not need a
    Python set of a million ints (tens of MiB) to walk its branch."""

    __slots__ = ("flags",)

    def __init__(self, size: int, rows: Sequence[int] = ()) -> None:
        self.flags = bytearray(size)
        for row in rows:
            self.flags[row] = 1

    def add(self, row: int) -> None:
        self.flags[row] = 1

    def __contains__(self, row: object) -> bool:
        return isinstance(row, int) and 0 <= row < len(self.flags) and self.flags[row] == 1


@dataclass(slots=True)
class Branch:
    rows: Sequence[int]
    abandoned_records: int
    file_order_fallback: bool
    bridged_gaps: int
    cycle_at_line: int | None


class _Bridge:
    """Finds the newest record at most BRIDGE_MS older than a child; built only when needed."""

    def __init__(self, table: RecordTable, main: array[int]) -> None:
        self.table = table
        timed = sorted((table.times[row], row) for row in main
                       if not math.isnan(table.times[row]))
        self.keys = timed

    def find(self, child: int, visited: RowSet) -> int | None:
        child_ms = self.table.times[child]
        if math.isnan(child_ms):
            return None
        index = bisect.bisect_right(self.keys, (child_ms, math.inf))
        while index > 0:
            index -= 1
            ms, row = self.keys[index]
            if child_ms - ms > BRIDGE_MS:
                return None
            if row != child and row not in visited:
                return row
        return None


def _byte_map(keep: Callable[[int], bool]) -> bytes:
    """A `bytes.translate` table: 1 for the byte values KEEP takes, 0 for the others."""
    return bytes(int(keep(value)) for value in range(256))


_OFF_SIDECHAIN = _byte_map(lambda flags: not flags & SIDECHAIN)
_SPEAKS = _byte_map(lambda kind: kind in CONVERSATION)
_UNSET = _byte_map(lambda flag: not flag)


def _both(first: bytes | bytearray, second: bytes | bytearray) -> bytes:
    """The bytewise AND of two 0/1 masks of the same length (at C speed, as big ints)."""
    both = int.from_bytes(first, "little") & int.from_bytes(second, "little")
    return both.to_bytes(len(first), "little")


def _rows(mask: bytes | bytearray) -> array[int]:
    return array("i", compress(range(len(mask)), mask))


def _main_mask(table: RecordTable) -> bytearray:
    """1 for each row on the main chain (not a sidechain, not superseded by a later copy).
    These masks are made with `translate` and big-int ANDs: a record costs no Python step."""
    mask = table.flags.translate(_OFF_SIDECHAIN)
    for row in table.superseded:
        mask[row] = 0
    return mask


def _last_conversation(table: RecordTable, speaking: bytes) -> tuple[int | None, bool]:
    """The last user/assistant row of SPEAKING (the mask of those of the main chain), and
    whether there are several and none has a parent (their rows are never listed: a million
    of them would cost 4 MiB)."""
    leaf = speaking.rfind(1)
    if leaf < 0:
        return None, False
    if speaking.count(1) == 1:
        return leaf, False
    return leaf, all(table.is_root(row) for row in compress(range(len(speaking)), speaking))


def active_branch(table: RecordTable, spoken_results: Sequence[int] = ()) -> Branch:
    """The branch of TABLE; SPOKEN_RESULTS: the rows of tool results that hold speech."""
    in_main = _main_mask(table)
    speaking_mask = _both(in_main, table.kinds.translate(_SPEAKS))
    leaf, unlinked = _last_conversation(table, speaking_mask)
    if leaf is None:
        return Branch([], 0, False, 0, None)
    if unlinked:
        return Branch(_rows(in_main), 0, True, 0, None)
    walk = _Walk(table, in_main)
    walk.run(leaf)
    walk.path.reverse()
    rows = _with_parallel_siblings(table, walk.path, walk.visited)
    rows = _with_hanging_results(table, rows, spoken_results)
    return Branch(rows, _abandoned(table, speaking_mask, rows), False, walk.bridged,
                  walk.cycle_at)


class _Walk:
    """The walk from the leaf back to the root: the path (leaf first), the rows visited, the
    gaps bridged by time and the line where the chain loops, if it does."""

    def __init__(self, table: RecordTable, in_main: bytearray) -> None:
        self.table, self.in_main = table, in_main
        self._main: array[int] | None = None
        self.bridge: _Bridge | None = None
        self.visited = RowSet(len(table))
        self.path = array("i")
        self.bridged = 0
        self.cycle_at: int | None = None

    @property
    def main(self) -> array[int]:
        """The rows of the main chain, listed only when a boundary or a gap needs them."""
        if self._main is None:
            self._main = _rows(self.in_main)
        return self._main

    def run(self, leaf: int) -> None:
        table, visited, path = self.table, self.visited.flags, self.path
        flags = table.flags
        current: int | None = leaf
        while current is not None:
            if visited[current]:
                self.cycle_at = table.lines[current]
                return
            visited[current] = 1
            path.append(current)
            if flags[current] & BOUNDARY:
                current = self._across_boundary(current)
                continue
            parent = table.parent_of(current)
            if parent == NO_PARENT:
                return
            if parent is None or flags[parent] & SIDECHAIN:
                parent = self._bridged(current)
            current = parent

    def _across_boundary(self, row: int) -> int | None:
        """The record before compaction boundary ROW: its logical parent, or the record just
        before it in file order."""
        logical = self.table.logical_parent_of(row)
        if logical is not None:
            return logical
        index = bisect.bisect_left(self.main, row)
        return self.main[index - 1] if index > 0 else None

    def _bridged(self, row: int) -> int | None:
        """The newest earlier record at most BRIDGE_MS older than ROW, whose parent is missing."""
        self.bridge = self.bridge or _Bridge(self.table, self.main)
        parent = self.bridge.find(row, self.visited)
        if parent is not None:
            self.bridged += 1
        return parent


def _with_parallel_siblings(table: RecordTable, path: array[int],
                            on_path: RowSet) -> Sequence[int]:
    """Add off-path records of on-path API messages; each message's records in file order."""
    if not _any_off_path(table, path, on_path):
        return path
    kinds = table.kinds
    ordered = array("i")
    placed = bytearray(len(table))  # by the first row of each message
    for row in path:
        if kinds[row] != ASSISTANT or not table.shares_message(row):
            ordered.append(row)
            continue
        first = table.message_first(row)
        if not placed[first]:
            placed[first] = 1
            ordered.extend(_grouped(table, first))
    return ordered


def _with_hanging_results(table: RecordTable, rows: Sequence[int],
                          spoken: Sequence[int]) -> Sequence[int]:
    """ROWS with each of SPOKEN (tool results holding speech) that is off them but hangs off
    one of them (a parallel call's result that is not the last to finish) placed right after
    its parent."""
    if not spoken:
        return rows
    included = RowSet(len(table), rows)
    after: dict[int, list[int]] = {}
    for row in spoken:
        parent = table.parent_of(row)
        if not included.flags[row] and parent is not None and parent >= 0 \
                and included.flags[parent] and not table.flags[row] & SIDECHAIN:
            after.setdefault(parent, []).append(row)
    if not after:
        return rows
    ordered = array("i")
    for row in rows:
        ordered.append(row)
        ordered.extend(after.get(row, ()))
    return ordered


def _grouped(table: RecordTable, row: int) -> list[int]:
    """The assistant records of ROW's API message on the main chain, in file order."""
    kinds, flags, superseded = table.kinds, table.flags, table.superseded
    return [r for r in table.message_rows(row) if kinds[r] == ASSISTANT
            and not flags[r] & SIDECHAIN and r not in superseded]


def _any_off_path(table: RecordTable, path: array[int], on_path: RowSet) -> bool:
    """Whether an on-path API message of several records has one of them off the path (its
    groups are made again when they are placed, never all kept at once)."""
    kinds, shares_message, message_first = table.kinds, table.shares_message, table.message_first
    placed = on_path.flags
    seen: bytearray | None = None  # by the first row of each message, once one is met
    for row in path:
        if kinds[row] != ASSISTANT or not shares_message(row):
            continue
        first = message_first(row)
        seen = seen or bytearray(len(table))
        if seen[first]:
            continue
        seen[first] = 1
        if not all(placed[r] for r in _grouped(table, first)):
            return True
    return False


def _abandoned(table: RecordTable, speaking: bytes, branch: Sequence[int]) -> int:
    """Conversation records (SPEAKING: their mask on the main chain) left on other branches
    (rewinds, edits, forks).

    Results of parallel tool calls hang off their own tool_use record on the branch by design
    and are not abandoned.
    """
    included = RowSet(len(table), branch)
    off_branch = _both(speaking, included.flags.translate(_UNSET))
    flags = table.flags
    count = 0
    for row in compress(range(len(off_branch)), off_branch):
        if flags[row] & TOOL_RESULT and table.parent_of(row) in included:
            continue
        count += 1
    return count
