"""Byte strings interned into dense codes, in flat arrays.

A session of a million records has a million uuids; a Python dict of them costs about 150 bytes
each (the key string, the row number object, the entry). Here a key costs its own bytes plus
one and a half to three codes (and its end offset, unless every key has one length): the keys
sit end to end in one bytearray, and an open-addressing table of codes finds them by hash (at
most two thirds full, grown by half: a table twice as big as its keys would be the largest
array of a million-message scan). The hash is
CRC-32, the same in every process (Python's `hash` of bytes is salted per interpreter), so the
table travels with the keys (a forked reader's pipe, the scan cache) and is never rebuilt on the
other side. While there are fewer than 2**24 keys, a slot also holds seven more bits of its key's
hash above the code (`TAG_SHIFT`): a probe that meets another key then costs an integer compare,
not a comparison of the keys' bytes (a uuid's probe met three keys on average).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Final
from zlib import crc32

from .arrays import append_wide

EMPTY = -1
_MIN_SLOTS = 1 << 10
# Slots hold TAG << TAG_SHIFT | code while codes fit below it (`Interner.tagged`), the tag being
# the hash's top seven bits (a table of fewer than 2**25 slots indexes by the ones below).
TAG_SHIFT = 24
_TAG_FROM: Final = 25


def _slots_for(keys: int, size: int) -> int:
    """The table size for KEYS keys, grown by half from SIZE until at most two thirds full."""
    while 3 * keys > 2 * size:
        size = size * 3 // 2
    return size


class Interner:
    """Distinct byte strings numbered 0, 1, 2, ... in the order they were first added.

    While every key has the same length WIDTH (a uuid's 16 raw bytes), key i sits at i * WIDTH
    and no offsets are kept; the first key of another length makes them real (`ends`).
    """

    __slots__ = ("blob", "count", "ends", "slots", "tagged", "width")

    def __init__(self, width: int = 0) -> None:
        self.blob = bytearray()
        self.width = width
        self.count = 0
        self.ends: array[int] | None = None if width else array("i", [0])  # 64-bit past 2 GiB
        self.tagged = True
        self.slots = array("i", [EMPTY]) * _MIN_SLOTS

    def __len__(self) -> int:
        return self.count

    def key(self, code: int) -> bytes:
        ends, width = self.ends, self.width
        if ends is None:
            return bytes(self.blob[code * width:(code + 1) * width])
        return bytes(self.blob[ends[code]:ends[code + 1]])

    def keys(self) -> Iterator[bytes]:
        """Every key, in the order of their codes (the blob must not grow meanwhile)."""
        if self.ends is None:
            return map(_first, struct.iter_unpack(f"{self.width}s", self.blob))
        ends, blob = self.ends, self.blob
        return (bytes(blob[ends[code]:ends[code + 1]]) for code in range(self.count))

    def find(self, key: bytes) -> int:
        """KEY's code, or EMPTY when it was never added."""
        if not self.slots:
            self._restore()
        return self._code(self.slots[self._probe(key, crc32(key))])

    def add(self, key: bytes) -> int:
        """KEY's code, numbering it when it is new."""
        if not self.slots:
            self._restore()
        hashed = crc32(key)
        slot = self._probe(key, hashed)
        slots = self.slots
        if slots[slot] != EMPTY:
            return self._code(slots[slot])
        code = self.count
        if self.ends is None and len(key) != self.width:
            self.ends = array("q", range(0, (code + 1) * self.width, self.width))
        self.blob += key
        if self.ends is not None:
            self.ends = append_wide(self.ends, len(self.blob))
        self.count = code + 1
        if self.tagged and code >> TAG_SHIFT:  # the codes need the tag's bits from here on
            self.tagged = False
            self._resize(len(slots))
            return code
        slots[slot] = _slot_value(code, hashed, self._shift())
        if 3 * (code + 1) > 2 * len(slots):
            self._resize(len(slots) * 3 // 2)
        return code

    def add_all(self, other: Interner) -> Sequence[int]:
        """The codes here of OTHER's keys, in the order of OTHER's codes, numbering those that
        are new as `add` does, the table grown once beforehand instead of step by step. When
        no key is in both (a set of the fewer keys tells, at C speed), OTHER's keys are
        appended whole and only placed in the table, and their codes are a `range`."""
        self.reserve(self.count + other.count)
        first = self.count
        if not self._appends_whole(other):
            return array("i", map(self.add, other.keys()))
        self.blob += other.blob
        self.count += other.count
        self._place(first)
        return range(first, self.count)

    def reserve(self, keys: int) -> None:
        """Grow the table at once for KEYS keys in all, when it would grow to hold them (a
        scan that can tell how many keys it will add saves placing them again at each step)."""
        size = _slots_for(keys, len(self.slots) or _MIN_SLOTS)
        if size > len(self.slots):
            self._resize(size)

    def _appends_whole(self, other: Interner) -> bool:
        """Whether OTHER's keys, all new here and of this width, can be appended as they are.
        Not asked when this table holds more than twice as many keys: then a probe for each of
        OTHER's keys costs less than the set of them and the pass over all of these."""
        if self.ends is not None or other.ends is not None or self.width != other.width \
                or self.count > 2 * other.count:
            return False
        if self.tagged and (self.count + other.count) >> TAG_SHIFT:
            return False
        fewer, more = (self, other) if self.count <= other.count else (other, self)
        shape = f"{self.width}s"
        known = set(map(_first, struct.iter_unpack(shape, fewer.blob)))
        return not any(map(known.__contains__, map(_first, struct.iter_unpack(shape, more.blob))))

    def _code(self, value: int) -> int:
        """The code a slot holds (EMPTY stays EMPTY)."""
        return value & ((1 << TAG_SHIFT) - 1) if self.tagged and value != EMPTY else value

    def _shift(self) -> int:
        """Where a slot's tag starts, -1 when the slots hold codes only."""
        return TAG_SHIFT if self.tagged else -1

    def _holds(self, code: int, key: bytes) -> bool:
        """Whether CODE is KEY's."""
        ends, blob = self.ends, self.blob
        if ends is None:
            return len(key) == self.width and blob.startswith(key, code * self.width)
        return blob[ends[code]:ends[code + 1]] == key

    def _probe(self, key: bytes, hashed: int) -> int:
        """The slot that holds KEY (whose CRC-32 is HASHED), or the empty slot where it would
        go (linear probing)."""
        slots = self.slots
        size = len(slots)
        slot = hashed % size
        if self.tagged:
            tag, shift = hashed >> _TAG_FROM, TAG_SHIFT
            mask = (1 << shift) - 1
            while (value := slots[slot]) != EMPTY:
                if value >> shift == tag and self._holds(value & mask, key):
                    return slot
                slot = (slot + 1) % size
            return slot
        while (value := slots[slot]) != EMPTY and not self._holds(value, key):
            slot = (slot + 1) % size
        return slot

    def _resize(self, size: int) -> None:
        self.slots = array("i")  # the old table goes before the new one comes
        self.slots = array("i", [EMPTY]) * size
        self._place(0)

    def release(self) -> None:
        """Let go of the hash table (the keys stay); the next `find` or `add` builds it again."""
        self.slots = array("i")

    def _restore(self) -> None:
        self._resize(_slots_for(self.count, _MIN_SLOTS))

    def __getstate__(self) -> tuple[bytearray, array[int] | None, int, int, array[int], bool]:
        return self.blob, self.ends, self.width, self.count, self.slots, self.tagged

    def __setstate__(self, state: tuple[bytearray, array[int] | None, int, int,
                                        array[int], bool]) -> None:
        self.blob, self.ends, self.width, self.count, self.slots, self.tagged = state

    def _place(self, first: int) -> None:
        """Put keys FIRST onwards in the table, where no slot holds them yet."""
        slots, blob, ends, width = self.slots, self.blob, self.ends, self.width
        size = len(slots)
        shift = self._shift()
        with memoryview(blob) as view:  # released before the blob grows again
            if ends is None:  # keys of one width: cut by struct and hashed at C speed, lazily
                hashes = map(crc32, map(_first, struct.iter_unpack(f"{width}s",
                                                                   view[first * width:])))
                for code, hashed in enumerate(hashes, first):
                    _put(slots, size, code, hashed, shift)
            else:
                for code in range(first, self.count):
                    _put(slots, size, code, crc32(view[ends[code]:ends[code + 1]]), shift)


def _put(slots: array[int], size: int, code: int, hashed: int, shift: int) -> None:
    """Code CODE, whose key's CRC-32 is HASHED, in the first empty slot from its own (tagged
    when SHIFT is not -1)."""
    slot = hashed % size
    while slots[slot] != EMPTY:
        slot = (slot + 1) % size
    slots[slot] = _slot_value(code, hashed, shift)


def _slot_value(code: int, hashed: int, shift: int) -> int:
    """What a slot holds for CODE, whose key's CRC-32 is HASHED: the code, under the hash's
    top bits from SHIFT on unless SHIFT is -1."""
    return (hashed >> _TAG_FROM) << shift | code if shift >= 0 else code


_first = itemgetter(0)
