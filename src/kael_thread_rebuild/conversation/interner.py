"""Byte strings interned into dense codes, in flat arrays.

A session of a million records has a million uuids; a Python dict of them costs about 150 bytes
each (the key string, the row number object, the entry). Here a key costs its own bytes plus
two to four codes (and its end offset, unless every key has one length): the keys sit end to
end in one bytearray, and an open-addressing table of codes finds them by hash. The hash is
CRC-32, the same in every process (Python's `hash` of bytes is salted per interpreter), so the
table travels with the keys (a forked reader's pipe, the scan cache) and is never rebuilt on the
other side.
"""

from __future__ import annotations

from array import array
from zlib import crc32

from .arrays import append_wide

EMPTY = -1
_MIN_SLOTS = 1 << 10


class Interner:
    """Distinct byte strings numbered 0, 1, 2, ... in the order they were first added.

    While every key has the same length WIDTH (a uuid's 16 raw bytes), key i sits at i * WIDTH
    and no offsets are kept; the first key of another length makes them real (`ends`).
    """

    __slots__ = ("blob", "count", "ends", "mask", "slots", "width")

    def __init__(self, width: int = 0) -> None:
        self.blob = bytearray()
        self.width = width
        self.count = 0
        self.ends: array[int] | None = None if width else array("i", [0])  # 64-bit past 2 GiB
        self.slots = array("i", [EMPTY]) * _MIN_SLOTS
        self.mask = _MIN_SLOTS - 1

    def __len__(self) -> int:
        return self.count

    def key(self, code: int) -> bytes:
        ends, width = self.ends, self.width
        if ends is None:
            return bytes(self.blob[code * width:(code + 1) * width])
        return bytes(self.blob[ends[code]:ends[code + 1]])

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
        if 2 * (code + 1) > len(slots):
            self._grow()
        return code

    def _probe(self, key: bytes) -> int:
        """The slot that holds KEY, or the empty slot where it would go (linear probing)."""
        slots, mask, blob, ends = self.slots, self.mask, self.blob, self.ends
        slot = crc32(key) & mask
        if ends is None:
            width = self.width
            if len(key) != width:
                while slots[slot] != EMPTY:
                    slot = (slot + 1) & mask
                return slot
            while (code := slots[slot]) != EMPTY and \
                    blob[code * width:(code + 1) * width] != key:
                slot = (slot + 1) & mask
            return slot
        while (code := slots[slot]) != EMPTY and blob[ends[code]:ends[code + 1]] != key:
            slot = (slot + 1) & mask
        return slot

    def _grow(self) -> None:
        self._resize(2 * len(self.slots))

    def _resize(self, size: int) -> None:
        self.slots = array("i", [EMPTY]) * size
        self.mask = size - 1
        self._rebuild()

    def release(self) -> None:
        """Let go of the hash table (the keys stay); the next `find` or `add` builds it again."""
        self.slots = array("i")
        self.mask = -1

    def _restore(self) -> None:
        size = _MIN_SLOTS
        while 2 * self.count > size:
            size *= 2
        self._resize(size)

    def __getstate__(self) -> tuple[bytearray, array[int] | None, int, int, array[int]]:
        return self.blob, self.ends, self.width, self.count, self.slots

    def __setstate__(self, state: tuple[bytearray, array[int] | None, int, int,
                                        array[int]]) -> None:
        self.blob, self.ends, self.width, self.count, self.slots = state
        self.mask = len(self.slots) - 1

    def _rebuild(self) -> None:
        slots, mask, blob, ends, width = self.slots, self.mask, self.blob, self.ends, self.width
        with memoryview(blob) as view:  # released before the blob grows again
            for code in range(self.count):
                key = (view[code * width:(code + 1) * width] if ends is None
                       else view[ends[code]:ends[code + 1]])
                slot = crc32(key) & mask
                while slots[slot] != EMPTY:
                    slot = (slot + 1) & mask
                slots[slot] = code
