"""SHA-256 whose running state can be saved and taken up again in another process.

hashlib's objects cannot be saved, so the scan cache could not continue a file's digest over
appended bytes. This drives the same OpenSSL library hashlib uses through its low-level API
(ctypes; the call releases the GIL like hashlib does), whose whole state is one plain struct.
Where that library or API cannot be found, or fails a known answer, `available` is False and
callers fall back to hashlib (and to a full scan).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from collections.abc import Iterator

CTX_BYTES = 112  # sizeof(SHA256_CTX): 8 + 2 + 16 + 2 unsigned ints (OpenSSL 1.1 and 3)
_LIBRARY_NAMES = ("libcrypto.so.3", "libcrypto.so.1.1")


def _names() -> Iterator[str]:
    """The libraries to try: the usual names first; `find_library` (which runs `ldconfig`, a
    process) only when none of them is there."""
    yield from _LIBRARY_NAMES
    import ctypes.util  # imports subprocess: only when needed

    found = ctypes.util.find_library("crypto")
    if found:
        yield found


@functools.cache
def _library() -> ctypes.CDLL | None:
    for name in _names():
        try:
            lib = ctypes.CDLL(name)
            lib.SHA256_Init.argtypes = [ctypes.c_char_p]
            lib.SHA256_Update.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
            lib.SHA256_Final.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            lib.OpenSSL_version.restype = ctypes.c_char_p
            lib.OpenSSL_version.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):
            continue
        if _known_answer(lib):
            return lib
    return None


def _known_answer(lib: ctypes.CDLL) -> bool:
    """Whether LIB's SHA-256, stopped and taken up again, gives hashlib's answer."""
    data = bytes(range(256)) * 3
    first = ctypes.create_string_buffer(CTX_BYTES)
    lib.SHA256_Init(first)
    lib.SHA256_Update(first, data[:100], 100)
    second = ctypes.create_string_buffer(first.raw, CTX_BYTES)
    lib.SHA256_Update(second, data[100:], len(data) - 100)
    out = ctypes.create_string_buffer(32)
    lib.SHA256_Final(out, second)
    return out.raw == hashlib.sha256(data).digest()


def available() -> bool:
    return _library() is not None


def library_version() -> str:
    """The OpenSSL version whose state layout a saved state belongs to ("" when none)."""
    lib = _library()
    return "" if lib is None else str(lib.OpenSSL_version(0).decode(errors="replace"))


class ResumableSha256:
    """SHA-256 started afresh, or from the STATE another one saved (see `state`)."""

    __slots__ = ("_ctx", "_lib")

    def __init__(self, state: bytes | None = None) -> None:
        lib = _library()
        if lib is None:
            raise OSError("no resumable SHA-256 on this machine")
        self._lib = lib
        if state is None:
            self._ctx = ctypes.create_string_buffer(CTX_BYTES)
            lib.SHA256_Init(self._ctx)
        elif len(state) == CTX_BYTES:
            self._ctx = ctypes.create_string_buffer(state, CTX_BYTES)
        else:
            raise ValueError("a SHA-256 state of the wrong size")

    def update(self, data: bytes | memoryview) -> None:
        """Go on over DATA (a memoryview must be of a writable buffer: ctypes takes its
        address from it, without a copy)."""
        size = len(data)
        buffer = (ctypes.c_char * size).from_buffer(data) if isinstance(data, memoryview) \
            else data
        self._lib.SHA256_Update(self._ctx, buffer, size)

    def state(self) -> bytes:
        return bytes(self._ctx.raw)

    def hexdigest(self) -> str:
        """The digest so far (the running state is left as it is)."""
        copy = ctypes.create_string_buffer(self._ctx.raw, CTX_BYTES)
        out = ctypes.create_string_buffer(32)
        self._lib.SHA256_Final(out, copy)
        return out.raw.hex()
