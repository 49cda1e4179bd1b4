"""The command-line readers let the C heap keep what a line frees for the next lines
(`conversation.heap.keep_freed_heap`): measured by where the heap ends after memory is freed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kael_thread_rebuild.conversation.heap import TOP_PAD_BYTES

# Sixteen MiB in blocks below malloc's mmap threshold (so on the heap), all freed again: how far
# the heap's end stayed past where it was.
PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, (ctypes.c_long,)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
if sys.argv[1] == "padded":
    from kael_thread_rebuild.conversation.heap import keep_freed_heap
    assert keep_freed_heap()
before = libc.sbrk(0)
blocks = [libc.malloc(64 << 10) for _ in range(256)]
for block in reversed(blocks):
    libc.free(block)
print(libc.sbrk(0) - before)
"""
FREED = 16 << 20
MIB = 1 << 20


def _kept(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], check=True, capture_output=True,
                         text=True).stdout
    return int(out)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_memory_stays_on_the_heap_only_when_padded() -> None:
    assert _kept("default") < MIB  # given back to the kernel at once
    assert TOP_PAD_BYTES - MIB <= _kept("padded") <= FREED + TOP_PAD_BYTES  # the pad kept
