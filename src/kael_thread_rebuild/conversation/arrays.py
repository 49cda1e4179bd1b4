"""Flat integer arrays that cost as little as their values allow.

A session of a million messages keeps a handful of numbers per message; at eight bytes each
that alone is tens of MiB. Counts start at two bytes and widen to eight the first time one does
not fit (`append_wide`, `extend_wide`); signed values start at one byte and widen a step at a
time (`append_signed`, `extend_signed`); a mapping that sends every index to itself (plus a
base) until a duplicate comes along costs nothing until then (`IdentityArray`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import Final

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


SIGNED_STEPS = {"b": "h", "h": "i", "i": "q"}


def _wider(values: array[int]) -> array[int]:
    """VALUES copied into the next wider signed type."""
    return array(SIGNED_STEPS[values.typecode], values)


def append_signed(values: array[int], value: int) -> array[int]:
    """VALUES with VALUE appended: the same array, or the next wider copy (b, h, i, q) until
    VALUE fits."""
    while True:
        try:
            values.append(value)
            return values
        except OverflowError:
            values = _wider(values)


def extend_signed(values: array[int], more: array[int]) -> array[int]:
    """VALUES extended by MORE (see `append_signed`)."""
    while values.itemsize < more.itemsize:
        values = _wider(values)
    if values.typecode != more.typecode:
        more = array(values.typecode, more)  # narrower: every value fits
    values.extend(more)
    return values


def padded(values: array[int] | None, size: int) -> array[int]:
    """VALUES (a new signed byte array when None) with zeros up to SIZE values."""
    if values is None:
        values = array("b")
    if len(values) < size:
        values.frombytes(bytes((size - len(values)) * values.itemsize))
    return values


def put_signed(values: array[int] | None, index: int, value: int) -> array[int]:
    """VALUES (see `padded`) with VALUE at INDEX: the same array, or the next wider copy
    until VALUE fits (see `append_signed`)."""
    values = padded(values, index + 1)
    while True:
        try:
            values[index] = value
            return values
        except OverflowError:
            values = _wider(values)


class IdentityArray:
    """Non-negative ints, value base + i at index i until one differs: then a real array
    (64-bit once a value passes 2**31)."""

    __slots__ = ("base", "size", "values")

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.size = 0
        self.values: array[int] | None = None

    def __len__(self) -> int:
        return self.size if self.values is None else len(self.values)

    def _real(self) -> array[int]:
        if self.values is None:
            self.values = array(WIDE if self.base + self.size > 2**31 else "i",
                                range(self.base, self.base + self.size))
        return self.values

    def append(self, value: int) -> None:
        values = self.values
        if values is None:
            if value == self.base + self.size:
                self.size += 1
                return
            values = self._real()
        try:
            values.append(value)
        except OverflowError:
            self.values = append_wide(values, value)

    def extend_shifted(self, more: IdentityArray, shift: int) -> None:
        """Append every value of MORE plus SHIFT (still the identity when both were and MORE
        goes on where this one ends)."""
        if self.values is None and more.values is None and \
                more.base + shift == self.base + self.size:
            self.size += more.size
            return
        shifted: Iterable[int]
        if more.values is None:
            shifted = range(more.base + shift, more.base + shift + more.size)
        else:
            shifted = map(shift.__add__, more.values)  # at C speed
        self.values = extend_wide(self._real(), shifted)

    def __getitem__(self, index: int) -> int:
        if self.values is not None:
            return self.values[index]
        if not 0 <= index < self.size:
            raise IndexError("IdentityArray index out of range")
        return self.base + index

    def __setitem__(self, index: int, value: int) -> None:
        if self.values is None and self.base + index == value and 0 <= index < self.size:
            return
        self._real()[index] = value

    def __iter__(self) -> Iterator[int]:
        if self.values is None:
            return iter(range(self.base, self.base + self.size))
        return iter(self.values)

    def is_identity(self) -> bool:
        return self.values is None


class TimeArray:
    """Epoch milliseconds, four bytes each: a base per BLOCK values and each value's offset
    from its block's base. NaN (no time) and the rare value that is not a whole millisecond or
    lies more than 24 days from its block's base are kept apart (`others`); once there are
    many of those, every value is kept as a float (`exact`)."""

    __slots__ = ("bases", "exact", "offsets", "others")
    # Final: compiled (setup.py), a plain class attribute would be an instance's field.
    BLOCK: Final = 256
    APART: Final = -(2**31)  # the offset of a value kept in `others`
    MAX_OTHERS: Final = 4096

    def __init__(self) -> None:
        self.bases = array("d")
        self.offsets = array("i")
        self.others: dict[int, float] = {}
        self.exact: array[float] | None = None

    def __len__(self) -> int:
        return len(self.offsets) if self.exact is None else len(self.exact)

    def append(self, value: float) -> None:
        if self.exact is not None:
            self.exact.append(value)
            return
        index = len(self.offsets)
        whole = value == value and value.is_integer()
        if index % self.BLOCK == 0:
            self.bases.append(value if whole else (self.bases[-1] if self.bases else 0.0))
        offset = value - self.bases[-1] if whole else 0.0
        if whole and self.APART < offset < 2**31:
            self.offsets.append(int(offset))
            return
        self.offsets.append(self.APART)
        self.others[index] = value
        if len(self.others) > self.MAX_OTHERS:
            self.exact = array("d", iter(self))
            self.bases, self.offsets, self.others = array("d"), array("i"), {}

    def extend(self, more: TimeArray) -> None:
        if more.exact is not None:
            for value in more.exact:
                self.append(value)
            return
        # MORE's own arrays read directly (its iterator costs a method call a value).
        bases, others, block, apart = more.bases, more.others, self.BLOCK, self.APART
        for index, offset in enumerate(more.offsets):
            self.append(others[index] if offset == apart else bases[index // block] + offset)

    def __getitem__(self, index: int) -> float:
        if self.exact is not None:
            return self.exact[index]
        size = len(self.offsets)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("TimeArray index out of range")
        offset = self.offsets[index]
        if offset == self.APART:
            return self.others[index]
        return self.bases[index // self.BLOCK] + offset

    def __iter__(self) -> Iterator[float]:
        if self.exact is not None:
            return iter(self.exact)
        return (self[index] for index in range(len(self.offsets)))
