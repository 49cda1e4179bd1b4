"""How glibc's malloc serves a scan: the two settings the engine gives it (`mallopt`).

Large arrays each get their own mapping (`map_large_blocks`, every scan), and where a forked
reader reads beside the command line, the freed top of the heap is kept for the next lines
(`keep_freed_heap`). Elsewhere (not glibc) nothing is tuned.
"""

from __future__ import annotations

import ctypes
import sys

# glibc's malloc.h: mallopt's parameters.
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 << 10
TOP_PAD_BYTES = 8 << 20


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's `mallopt`; False where there is none or it refuses (musl has one that does
    nothing and says so)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(parameter, value))


def map_large_blocks() -> None:
    """Have glibc give every block of MMAP_THRESHOLD bytes or more its own mapping, always.

    Its default raises that threshold after a mapped block is freed, so the arrays of a large
    scan end up in the heap, where each growth copies them and leaves holes that stay resident
    (a million-record scan: about 20 MiB). Mapped, they grow in place and go back when freed.
    """
    _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def keep_freed_heap(pad: int = TOP_PAD_BYTES) -> bool:
    """Set malloc's top pad to PAD bytes for the rest of this process (and the children it
    forks); False where it cannot be set.

    Reading a transcript allocates and frees memory line after line (the line's bytes, its
    parsed strings and dicts). By default (a pad of 128 KiB) malloc gives the free memory at the
    top of its heap back to the kernel and asks for it again for the next long line, so the
    kernel clears and maps the same pages over and over: at 1 GiB, about 500,000 page faults and
    more than a second of the kernel's CPU. 8 MiB takes the faults to 166,000 and the plan about
    12% faster, for up to 8 MiB more per process (benchmarks/README.md, "Figures: issue 26, the
    heap kept"). The command line sets it where a forked child reads beside it: a file read by
    one process is one of very many records, whose tables leave no room below the 100 MiB
    target. A long-running server does not set it.
    """
    return _mallopt(M_TOP_PAD, pad)
