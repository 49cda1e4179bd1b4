"""Flat integer arrays that cost as little as their values allow.

A session of a million messages keeps a handful of numbers per message; at eight bytes each
that alone is tens of MiB. Counts start at two bytes and widen to eight the first time one does
not fit (`append_wide`, `extend_wide`); a mapping that sends every index to itself until a
duplicate comes along costs nothing until then (`IdentityArray`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

NARROW = "H"  # unsigned, two bytes
WIDE = "q"


def narrow() -> array[int]:
    return array(NARROW)


def append_wide(values: array[int], value: int) -> array[int]:
    """VALUES with VALUE appended: the same array, or a wider copy when VALUE does not fit."""
    try:
        values.append(value)
    except OverflowError:
        values = array(WIDE, values)
        values.append(value)
    return values


def extend_wide(values: array[int], more: Iterable[int]) -> array[int]:
    """VALUES extended by MORE (see `append_wide`)."""
    if not isinstance(more, array):
        more = array(WIDE, more)
    if more.typecode != values.typecode:
        try:
            more = array(values.typecode, more)
        except OverflowError:
            values, more = array(WIDE, values), array(WIDE, more)
    values.extend(more)
    return values


class IdentityArray:
    """Non-negative ints, value i at index i until one differs: then a real array."""

    __slots__ = ("size", "values")

    def __init__(self) -> None:
        self.size = 0
        self.values: array[int] | None = None

    def __len__(self) -> int:
        return self.size if self.values is None else len(self.values)

    def _real(self) -> array[int]:
        if self.values is None:
            self.values = array("i", range(self.size))
        return self.values

    def append(self, value: int) -> None:
        if self.values is None and value == self.size:
            self.size += 1
        else:
            self._real().append(value)

    def __getitem__(self, index: int) -> int:
        if self.values is not None:
            return self.values[index]
        if not 0 <= index < self.size:
            raise IndexError("IdentityArray index out of range")
        return index

    def __setitem__(self, index: int, value: int) -> None:
        if self.values is None and index == value and 0 <= index < self.size:
            return
        self._real()[index] = value

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.size) if self.values is None else self.values)

    def is_identity(self) -> bool:
        return self.values is None
