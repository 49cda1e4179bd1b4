"""Speech items in branch order, grouped into turns.

Consecutive user messages belong to one turn and an assistant reply closes it; runtime records
between messages never break a turn; assistant words before the first user message are dropped.

Turns are index ranges over the items of the branch, and an `Item` is made only when it is
looked at: a session of a million messages keeps a few bytes per item, not a Python object.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

from .arrays import IdentityArray
from .records import USER_ROLE, Origin, Role, SpeechStore
from .table import RecordTable
from .tokens import tokens_from_counts


class Item(NamedTuple):
    """One speech item of the plan. Its words are not held: `texts.read_texts` reads them from
    the source line at OFFSET (item SLOT of that record) and checks them against DIGEST (the
    start of their SHA-256, `records.words_match`)."""

    role: Role
    origin: Origin
    source_uuid: str
    source_line: int
    source_timestamp: str | None
    digest: str
    utf8_bytes: int
    chars: int
    cjk: int
    offset: int
    length: int
    slot: int


@dataclass(slots=True, frozen=True)
class BranchItems:
    """The speech items of the branch, in order, as indexes into the speech store (free while
    they are the store's items in store order, as they are when the session never branched)."""

    table: RecordTable
    store: SpeechStore
    order: IdentityArray

    def item(self, position: int) -> Item:
        store = self.store
        index = self.order[position]
        owner = store.owner_of(index)
        row = store.rows[owner]
        return Item(store.role(index), store.origin(index), self.table.uuid_of(row),
                    self.table.lines[row], store.timestamp(owner, self.table.times[row]),
                    store.digest(index),
                    store.utf8_bytes[index], store.char_count(index), store.cjk_count(index),
                    store.offsets[owner], store.length_of(owner), index - store.first_items[owner])

    def tokens(self, start: int, end: int, divisor: float) -> int:
        """The token estimate of items START to END, without making the items."""
        store, order = self.store, self.order
        char_count, cjk_count = store.char_count, store.cjk_count
        total = 0
        for position in range(start, end):
            index = order[position]
            total += tokens_from_counts(char_count(index), cjk_count(index), divisor)
        return total

    def summary(self) -> tuple[dict[str, int], int, tuple[int, int]]:
        """Items by origin, their UTF-8 bytes, and the longest as (characters, source line)."""
        store, lines = self.store, self.table.lines
        by_origin = {origin.value: 0 for origin in Origin}
        total = 0
        longest = (0, 0)
        for index in self.order:
            by_origin[store.origin(index)] += 1
            total += store.utf8_bytes[index]
            chars = store.char_count(index)
            if chars >= longest[0]:
                line = lines[store.rows[store.owner_of(index)]]
                longest = max(longest, (chars, line))
        return by_origin, total, longest


@dataclass(slots=True, frozen=True)
class Turn:
    """Items [start, middle) of the branch are the user's, [middle, end) the assistant's."""

    source: BranchItems
    start: int
    middle: int
    end: int

    @property
    def is_open(self) -> bool:
        return self.middle == self.end

    @property
    def user(self) -> list[Item]:
        return [self.source.item(position) for position in range(self.start, self.middle)]

    @property
    def assistant(self) -> list[Item]:
        return [self.source.item(position) for position in range(self.middle, self.end)]

    @property
    def items(self) -> list[Item]:
        return [self.source.item(position) for position in range(self.start, self.end)]

    @property
    def item_count(self) -> int:
        """len(self.items), without making the items."""
        return self.end - self.start

    def tokens(self, divisor: float) -> int:
        return self.source.tokens(self.start, self.end, divisor)


class TurnList(Sequence[Turn]):
    """Turns LOW to HIGH of two flat arrays of item positions (each turn starts where the one
    before ends, the first at 0); a `Turn` is made when one is asked for, and a slice shares
    the arrays."""

    __slots__ = ("ends", "high", "low", "middles", "source")

    def __init__(self, source: BranchItems, middles: array[int], ends: array[int],
                 low: int = 0, high: int | None = None) -> None:
        self.source = source
        self.middles, self.ends = middles, ends
        self.low, self.high = low, len(ends) if high is None else high

    def __len__(self) -> int:
        return self.high - self.low

    @overload
    def __getitem__(self, index: int) -> Turn: ...

    @overload
    def __getitem__(self, index: slice) -> TurnList: ...

    def __getitem__(self, index: int | slice) -> Turn | TurnList:
        size = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(size)
            if step != 1:
                raise ValueError("a TurnList slice takes consecutive turns")
            return TurnList(self.source, self.middles, self.ends, self.low + start,
                            self.low + max(start, stop))
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("TurnList index out of range")
        return self._turn(self.low + index)

    def _turn(self, at: int) -> Turn:
        start = self.ends[at - 1] if at else 0
        return Turn(self.source, start, self.middles[at], self.ends[at])

    def __iter__(self) -> Iterator[Turn]:
        for at in range(self.low, self.high):
            yield self._turn(at)

    def tokens(self, divisor: float) -> int:
        """The token estimate of every item of these turns (one pass over them)."""
        if self.high <= self.low:
            return 0
        start = self.ends[self.low - 1] if self.low else 0
        return self.source.tokens(start, self.ends[self.high - 1], divisor)

    def items(self) -> Iterator[Item]:
        """Every item of every turn, in order."""
        for turn in self:
            for position in range(turn.start, turn.end):
                yield self.source.item(position)


@dataclass(slots=True)
class Turns:
    turns: TurnList
    leading_assistant_items: int


def build_turns(rows: Sequence[int], table: RecordTable, store: SpeechStore) -> Turns:
    order = IdentityArray()
    middles, ends = array("i"), array("i")
    leading = 0
    kinds, place = store.kinds, order.append
    speaking, first_items = store.rows, store.first_items
    count, item_count = len(speaking), len(kinds)
    # The branch's rows go up but where parallel calls or a compaction reorder them: the store's
    # speaking records are walked beside them (AT: the first at or past the last row met), and
    # looked up only where a row goes back.
    at = last = 0
    # The open turn's ends, as locals (once an item, for every item): [start, middle) its
    # user's items, [middle, end) its assistant's; written out when the next turn starts.
    middle = end = -1
    for row in rows:
        if row < last:
            at = store.position_of(row)
        else:
            while at < count and speaking[at] < row:
                at += 1
        last = row
        if at == count or speaking[at] != row:
            continue
        for item in range(first_items[at], first_items[at + 1] if at + 1 < count else item_count):
            if kinds[item] >> 4 == USER_ROLE:
                if middle != end or end < 0:
                    if end >= 0:
                        middles.append(middle)
                        ends.append(end)
                    middle = end = len(order)
                place(item)
                middle += 1
                end += 1
            elif end >= 0:
                place(item)
                end += 1
            else:
                leading += 1
    if end >= 0:
        middles.append(middle)
        ends.append(end)
    return Turns(TurnList(BranchItems(table, store, order), middles, ends), leading)
