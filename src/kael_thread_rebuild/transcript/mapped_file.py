"""A byte range of a file read through a mapping of it, not copied: its lines for the reader
(`mapped_lines`), its chunks for the digest (`mapped_chunks`).

Reading a line with `readline` copies it twice (the kernel into the buffer, the buffer into a
new bytes object), and a line over glibc's mapping threshold is a fresh block whose pages the
kernel clears and maps again; `pread` for the digest copies every byte once more. A view of a
mapping is the page cache's own pages: on the 200 MiB benchmark transcript, reading and parsing
every line took 0.46 s of CPU instead of 0.56 s (benchmarks/README.md, "Figures: issue 26, the
file mapped").

The pages behind the reader are let go of (`MADV_DONTNEED`) every STEP bytes, and the mapping
is kept out of huge pages, so that the process holds no more of the file than a buffered reader
did (about a step each for the reader and the digest), however long a line is.

A file is read as of the size it had when its scan started (Claude Code only appends). A mapped
page past the end of a file cut shorter meanwhile cannot be read (the kernel stops the process
with SIGBUS), so the file's size is checked at every step, before the next pages are touched:
a file cut shorter is an OSError (`FileShrank`), as a failed read is.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Iterator

from mypy_extensions import mypyc_attr

STEP = 1 << 20
_PAGE = mmap.PAGESIZE


# Compiled (setup.py), a class derived from a builtin one must stay a Python class.
@mypyc_attr(native_class=False)
class FileShrank(OSError):
    """The file got shorter than the range being read."""

    def __init__(self, size: int, end: int) -> None:
        super().__init__(errno.EIO, f"the file was cut to {size} bytes while its first {end} "
                                    "were being read")


class _Mapping:
    """The bytes [START, START + LENGTH) of the file open as FD, mapped (from the page before
    START), with the size checks and releases above. COPY: mapped private and writable (ctypes
    takes the address of a writable buffer only; nothing is ever written to it)."""

    def __init__(self, fd: int, start: int, length: int, *, copy: bool = False) -> None:
        self.fd = fd
        self.base = start - start % mmap.ALLOCATIONGRANULARITY
        self.first = start - self.base
        self.end = self.first + length
        access = mmap.ACCESS_COPY if copy else mmap.ACCESS_READ
        try:
            self.mapped = mmap.mmap(fd, self.end, access=access, offset=self.base)
        except ValueError:  # mmap's own check: the file is shorter than the range
            raise FileShrank(os.fstat(fd).st_size, self.base + self.end) from None
        except OSError as exc:
            if exc.errno != errno.ENOMEM:
                raise
            raise OSError(errno.ENOMEM, f"no address space to map the {self.end} bytes to read "
                                        "(is it limited: ulimit -v, LimitAS=?)") from None
        # Pages, not huge pages: the kernel maps a file's large folio whole where it can, and
        # holds it until all of it is let go of (the reader held 4 MiB, not 1; the chat of a
        # million messages went over its 100 MiB). Not every kernel has them (then OSError).
        with contextlib.suppress(OSError, AttributeError):
            self.mapped.madvise(mmap.MADV_NOHUGEPAGE)
        self.released = 0
        self.checked = self.first

    def reach(self, kept: int) -> int:
        """Let go of what lies before KEPT (at most the checked part), then check the next
        step: how far the mapping may now be read. A page let go of and then read again stays
        (`release` goes on from where it stopped), so KEPT is where the bytes still to be read
        start: a page can be larger than it looks (the kernel maps a large folio whole)."""
        self.release(min(kept, self.checked))
        reach = min(self.checked + STEP, self.end)
        size = os.fstat(self.fd).st_size
        if size < self.base + reach:
            raise FileShrank(size, self.base + self.end)
        self.checked = reach
        return reach

    def release(self, position: int) -> None:
        """Drop the whole pages before POSITION from the process (they are read again from the
        page cache if they are touched again)."""
        upto = position - position % _PAGE
        if upto > self.released:
            self.mapped.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            self.released = upto


def mapped_lines(fd: int, start: int, length: int,
                 longest: int) -> Iterator[tuple[int, int, memoryview | None, bool]]:
    """(offset, size, bytes, complete) of each line of the LENGTH bytes at START of the file
    open as FD, in order. BYTES is a view of the mapping, valid until the next line is asked
    for, or None for a line longer than LONGEST (read it by its offset: its pages are let go of
    as it is measured) or one cut off by the range's end (COMPLETE false: no newline)."""
    if length <= 0:
        return
    mapping = _Mapping(fd, start, length)
    base, end = mapping.base, mapping.end
    with mapping.mapped, memoryview(mapping.mapped) as whole:
        find = mapping.mapped.find
        position = mapping.first
        checked = mapping.reach(position)
        while position < end:
            newline = find(b"\n", position, checked)
            while newline < 0 and checked < end:  # on to the next step
                # A line already longer than LONGEST is only measured: its pages can go.
                kept = position if checked - position <= longest else checked
                reached, checked = checked, mapping.reach(kept)
                newline = find(b"\n", reached, checked)
            if newline < 0:
                yield base + position, end - position, None, False
                return
            size = newline + 1 - position
            if size > longest:
                mapping.release(newline)
                yield base + position, size, None, True
            else:
                with whole[position:newline + 1] as line:
                    yield base + position, size, line, True
            position = newline + 1


def mapped_chunks(fd: int, start: int, length: int) -> Iterator[memoryview]:
    """The LENGTH bytes at START of the file open as FD, STEP bytes at a time, as writable views
    of a private mapping, each valid until the next is asked for."""
    if length <= 0:
        return
    mapping = _Mapping(fd, start, length, copy=True)
    with mapping.mapped, memoryview(mapping.mapped) as whole:
        position = mapping.first
        while position < mapping.end:
            reach = mapping.reach(position)
            with whole[position:reach] as chunk:
                yield chunk
            position = reach
