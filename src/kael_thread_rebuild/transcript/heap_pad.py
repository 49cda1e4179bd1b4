"""Let the C heap keep the memory a transcript's lines free, for the next lines to use.

Reading a transcript allocates and frees memory line after line (the line's bytes, its parsed
strings and dicts). By default glibc's malloc gives the free memory at the top of its heap back
to the kernel at once and asks for it again for the next line, so the kernel clears and maps the
same pages over and over: about a tenth of `plan`'s time on a realistic transcript
(benchmarks/README.md, "Figures: issue 26, the heap kept"). A top pad makes the heap grow and
shrink in steps of that size instead. Only pages the process touches count in its RSS, so the
peak does not grow; the command-line readers set it, a long-running server does not.
"""

from __future__ import annotations

import ctypes

# glibc's malloc.h: mallopt's parameter for the top pad.
M_TOP_PAD = -2
TOP_PAD_BYTES = 64 << 20


def keep_freed_heap(pad: int = TOP_PAD_BYTES) -> bool:
    """Set malloc's top pad to PAD bytes for the rest of this process (and the children it
    forks); False where the C library has no `mallopt` or refuses (musl has one that does
    nothing and says so)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TOP_PAD, pad))
