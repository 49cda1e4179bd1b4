"""Byte strings interned into dense codes, in flat arrays.

A session of a million records has a million uuids; a Python dict of them costs about 150 bytes
each (the key string, the row number object, the entry). Here a key costs its own bytes plus
one and a half to three codes (and its end offset, unless every key has one length): the keys
sit end to end in one bytearray, and an open-addressing table of codes finds them by hash (at
most two thirds full, grown by half: a table twice as big as its keys would be the largest
array of a million-message scan). The hash is
CRC-32, the same in every process (Python's `hash` of bytes is salted per interpreter), so the
table travels with the keys (a forked reader's pipe, the scan cache) and is never rebuilt on the
other side.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from zlib import crc32

from .arrays import append_wide

EMPTY = -1
_MIN_SLOTS = 1 << 10


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

    __slots__ = ("blob", "count", "ends", "slots", "width")

    def __init__(self, width: int = 0) -> None:
        self.blob = bytearray()
        self.width = width
        self.count = 0
        self.ends: array[int] | None = None if width else array("i", [0])  # 64-bit past 2 GiB
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
            return (key for (key,) in struct.iter_unpack(f"{self.width}s", self.blob))
        ends, blob = self.ends, self.blob
        return (bytes(blob[ends[code]:ends[code + 1]]) for code in range(self.count))

    def find(self, key: bytes) -> int:
        """KEY's code, or EMPTY when it was never added."""
        if not self.slots:
            self._restore()
        return self.slots[self._probe(key)]

    def add(self, key: bytes) -> int:
        """KEY's code, numbering it when it is new."""
        if not self.slots:
            self._restore()
        slot = self._probe(key)
        slots = self.slots
        code = slots[slot]
        if code != EMPTY:
            return code
        code = self.count
        if self.ends is None and len(key) != self.width:
            self.ends = array("q", range(0, (code + 1) * self.width, self.width))
        self.blob += key
        if self.ends is not None:
            self.ends = append_wide(self.ends, len(self.blob))
        self.count = code + 1
        slots[slot] = code
        if 3 * (code + 1) > 2 * len(slots):
            self._resize(len(slots) * 3 // 2)
        return code

    def add_all(self, other: Interner) -> array[int]:
        """The codes here of OTHER's keys, in the order of OTHER's codes, numbering those that
        are new as `add` does, the table grown once beforehand instead of step by step."""
        if not self.slots:
            self._restore()
        size = _slots_for(self.count + other.count, len(self.slots))
        if size > len(self.slots):
            self._resize(size)
        return array("i", map(self.add, other.keys()))

    def _probe(self, key: bytes) -> int:
        """The slot that holds KEY, or the empty slot where it would go (linear probing)."""
        slots, blob, ends = self.slots, self.blob, self.ends
        size = len(slots)
        slot = crc32(key) % size
        if ends is None:
            width = self.width
            if len(key) != width:
                while slots[slot] != EMPTY:
                    slot = (slot + 1) % size
                return slot
            while (code := slots[slot]) != EMPTY and not blob.startswith(key, code * width):
                slot = (slot + 1) % size
            return slot
        while (code := slots[slot]) != EMPTY and blob[ends[code]:ends[code + 1]] != key:
            slot = (slot + 1) % size
        return slot

    def _resize(self, size: int) -> None:
        self.slots = array("i")  # the old table goes before the new one comes
        self.slots = array("i", [EMPTY]) * size
        self._rebuild()

    def release(self) -> None:
        """Let go of the hash table (the keys stay); the next `find` or `add` builds it again."""
        self.slots = array("i")

    def _restore(self) -> None:
        self._resize(_slots_for(self.count, _MIN_SLOTS))

    def __getstate__(self) -> tuple[bytearray, array[int] | None, int, int, array[int]]:
        return self.blob, self.ends, self.width, self.count, self.slots

    def __setstate__(self, state: tuple[bytearray, array[int] | None, int, int,
                                        array[int]]) -> None:
        self.blob, self.ends, self.width, self.count, self.slots = state

    def _rebuild(self) -> None:
        slots, blob, ends, width = self.slots, self.blob, self.ends, self.width
        size = len(slots)
        with memoryview(blob) as view:  # released before the blob grows again
            # Keys of one width: cut by struct, cheaper than a slice each (its iterator lets go
            # of the blob when it is through).
            keys = (struct.iter_unpack(f"{width}s", blob) if ends is None
                    else ((view[ends[code]:ends[code + 1]],) for code in range(self.count)))
            for code, (key,) in enumerate(keys):
                slot = crc32(key) % size
                while slots[slot] != EMPTY:
                    slot = (slot + 1) % size
                slots[slot] = code
