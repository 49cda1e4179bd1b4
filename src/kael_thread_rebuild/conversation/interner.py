"""Byte strings interned into dense codes, in flat arrays.

A session of a million records has a million uuids; a Python dict of them costs about 150 bytes
each (the key string, the row number object, the entry). Here a key costs its own bytes plus
three machine words: the keys sit end to end in one bytearray, and an open-addressing table of
codes finds them by hash. The hash is CRC-32, the same in every process (Python's `hash` of bytes
is salted per interpreter), so the table travels with the keys (a forked reader's pipe, the
scan cache) and is never rebuilt on the other side.
"""

from __future__ import annotations

from array import array
from zlib import crc32

from .arrays import append_wide

EMPTY = -1
_MIN_SLOTS = 1 << 10


class Interner:
    """Distinct byte strings numbered 0, 1, 2, ... in the order they were first added."""

    __slots__ = ("blob", "ends", "mask", "slots")

    def __init__(self) -> None:
        self.blob = bytearray()
        self.ends = array("i", [0])  # 64-bit once the keys pass 2 GiB
        self.slots = array("i", [EMPTY]) * _MIN_SLOTS
        self.mask = _MIN_SLOTS - 1

    def __len__(self) -> int:
        return len(self.ends) - 1

    def key(self, code: int) -> bytes:
        ends = self.ends
        return bytes(self.blob[ends[code]:ends[code + 1]])

    def find(self, key: bytes) -> int:
        """KEY's code, or EMPTY when it was never added."""
        return self.slots[self._probe(key)]

    def add(self, key: bytes) -> int:
        """KEY's code, numbering it when it is new."""
        slot = self._probe(key)
        slots = self.slots
        code = slots[slot]
        if code != EMPTY:
            return code
        code = len(self.ends) - 1
        self.blob += key
        self.ends = append_wide(self.ends, len(self.blob))
        slots[slot] = code
        if 2 * (code + 1) > len(slots):
            self._grow()
        return code

    def _probe(self, key: bytes) -> int:
        """The slot that holds KEY, or the empty slot where it would go (linear probing)."""
        slots, mask, blob, ends = self.slots, self.mask, self.blob, self.ends
        slot = crc32(key) & mask
        while (code := slots[slot]) != EMPTY and blob[ends[code]:ends[code + 1]] != key:
            slot = (slot + 1) & mask
        return slot

    def _grow(self) -> None:
        size = 2 * len(self.slots)
        self.slots = array("i", [EMPTY]) * size
        self.mask = size - 1
        self._rebuild()

    def __getstate__(self) -> tuple[bytearray, array[int], array[int]]:
        return self.blob, self.ends, self.slots

    def __setstate__(self, state: tuple[bytearray, array[int], array[int]]) -> None:
        self.blob, self.ends, self.slots = state
        self.mask = len(self.slots) - 1

    def _rebuild(self) -> None:
        slots, mask, blob, ends = self.slots, self.mask, self.blob, self.ends
        with memoryview(blob) as view:  # released before the blob grows again
            for code in range(len(ends) - 1):
                slot = crc32(view[ends[code]:ends[code + 1]]) & mask
                while slots[slot] != EMPTY:
                    slot = (slot + 1) & mask
                slots[slot] = code
