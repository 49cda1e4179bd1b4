"""Let the C heap keep the memory a transcript's lines free, for the next lines to use.

Reading a transcript allocates and frees memory line after line (the line's bytes, its parsed
strings and dicts). By default glibc's malloc gives the free memory at the top of its heap back
to the kernel and asks for it again for the next long line, so the kernel clears and maps the
same pages over and over: at 1 GiB, about 500,000 page faults and more than a second of the
kernel's CPU. A top pad makes the heap keep that much at its top instead: 8 MiB takes the faults
to 166,000 and the plan about 12% faster, for up to 8 MiB more per process (benchmarks/README.md,
"Figures: issue 26, the heap kept"). The command line sets it where a forked child reads beside
it: a file read by one process is one of very many records, whose tables leave no room below the
100 MiB target. A long-running server does not set it.
"""

from __future__ import annotations

import ctypes

# glibc's malloc.h: mallopt's parameter for the top pad.
M_TOP_PAD = -2
TOP_PAD_BYTES = 8 << 20


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
