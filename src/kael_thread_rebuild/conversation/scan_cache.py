"""The scan cache: what a scan learnt from a transcript's complete lines, kept in the state dir
so that the next `dirty` or `plan` of the same, grown file reads only the bytes appended since.

An entry is used only when everything that could make it wrong matches: the cache format, the
engine (its version and the code of its scan), the Python and OpenSSL versions, the speech rules
(`speech_tool_pattern`, `answer_tool_pattern`), the file's device and inode, a size at least that
of the part already read, and the SHA-256 of samples of that part (its first and last 64 KiB and
evenly spaced windows between, read again each time). Anything else (a file replaced,
truncated, rewritten; an entry torn, foreign or of another version) means a full scan, whose
result replaces the entry; a cache is never an error. A torn final line (a write in progress)
is never part of what is kept. Entries are written atomically, 0600, at most MAX_ENTRY_BYTES
each and MAX_ENTRIES in all (the oldest go); deleting them is always safe.

An entry is FORMAT, a header line (the file's device, inode, the size read and its samples' digest,
in plain text), the pickled `ScanState`, and a trailer: the SHA-256 of header and state. The header
lets `takes_up` tell with a few reads, before the engine is imported, whether a scan will start
from the entry (`interfaces.prestart` then starts no early reader).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from .. import __version__
from ..claude_code import record_shapes
from ..compiled_modules import is_compiled, source_of
from ..errors import KaelError
from ..fsutil import AtomicFile, atomic_writer, is_private_file
from ..transcript import json_text, reader, sha256_state, skeleton
from ..transcript.reader import READ_BUFFER, FileDigest, ReadStats, read_records
from . import array_pickle, arrays, injected, interner, measured, records, table, tokens
from . import scan as scan_module
from .records import Classifier, SpeechRules
from .scan import Scan, SecondHalf, scan

_SCAN_MODULES = (array_pickle, arrays, injected, interner, json_text, measured, reader,
                 record_shapes, records, scan_module, sha256_state, skeleton, table, tokens)
FORMAT = b"kael-scan-cache 2\n"
HEADER_MAX_BYTES = 256
MAX_ENTRY_BYTES = 128 << 20  # a million records take about 90 MiB
MAX_ENTRIES = 2  # the live session and the one before it
SAMPLE_BYTES = 64 << 10
SAMPLE_WINDOWS = 16
SUFFIX = ".scan"
TRAILER_BYTES = 65  # a newline and the payload's SHA-256 in hex

# What an entry may name when it is read back: the engine's own scan classes and the plain
# containers they hold. Anything else in a file makes it no entry (never code that runs).
_ALLOWED = {
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
    ("array", "array"), ("array", "_array_reconstructor"), ("re", "_compile"),
    ("kael_thread_rebuild.conversation.array_pickle", "rebuilt_array"),
    ("copyreg", "_reconstructor"), ("builtins", "object"),
    ("kael_thread_rebuild.conversation.scan_cache", "ScanState"),
    ("kael_thread_rebuild.transcript.reader", "ReadStats"),
    ("kael_thread_rebuild.conversation.records", "Classifier"),
    ("kael_thread_rebuild.conversation.records", "Dirt"),
    ("kael_thread_rebuild.conversation.records", "SpeechToolMatcher"),
    ("kael_thread_rebuild.conversation.records", "SpeechStore"),
    ("kael_thread_rebuild.conversation.records", "SnapshotPart"),
    ("kael_thread_rebuild.conversation.table", "RecordTable"),
    ("kael_thread_rebuild.conversation.arrays", "IdentityArray"),
    ("kael_thread_rebuild.conversation.arrays", "TimeArray"),
    ("kael_thread_rebuild.conversation.interner", "Interner"),
}


@dataclass(slots=True)
class ScanState:
    """The scan of a file's first READ_TO bytes (complete lines only), and its digest's state
    after HASHED_TO (<= READ_TO) bytes."""

    key: tuple[Any, ...]
    read_to: int
    samples: str
    hashed_to: int
    hash_state: bytes
    read: Classifier
    tally: dict[str, int]
    stats: ReadStats


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a scan")
        return super().find_class(module, name)


def entry_path(cache_dir: Path, path: Path) -> Path:
    """The entry of the transcript at PATH (one per transcript)."""
    name = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:32]
    return cache_dir / f"{name}{SUFFIX}"


@functools.cache
def _engine_digest() -> str:
    """SHA-256 of the code that decides what a scan keeps (a change there, even under the same
    version number, makes every entry another engine's)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())  # what an entry holds, too
    for module in _SCAN_MODULES:
        # A compiled module pickles its objects its own way: an entry is one engine's.
        digest.update(b"compiled" if is_compiled(module) else b"interpreted")
        digest.update(source_of(module).read_bytes())
    return digest.hexdigest()


def _key(status: os.stat_result, rules: SpeechRules) -> tuple[Any, ...]:
    return (__version__, _engine_digest(), sys.version_info[:2],
            sha256_state.library_version(), rules.key, status.st_dev, status.st_ino)


def _samples(fd: int, size: int) -> str:
    """SHA-256 of SAMPLE_WINDOWS windows of the first SIZE bytes of FD (first, last, between)."""
    digest = hashlib.sha256(str(size).encode())
    last = max(size - SAMPLE_BYTES, 0)
    starts = sorted({last * i // (SAMPLE_WINDOWS - 1) for i in range(SAMPLE_WINDOWS)})
    for start in starts:
        digest.update(os.pread(fd, min(SAMPLE_BYTES, size - start), start))
    return digest.hexdigest()


def _header(device: int, inode: int, read_to: int, samples: str) -> bytes:
    return f"{device} {inode} {read_to} {samples}\n".encode()


def caches(cache_dir: Path | None) -> TypeGuard[Path]:
    """Whether scans go through CACHE_DIR at all: there is one (a state dir), and SHA-256 can
    be resumed from a saved state."""
    return cache_dir is not None and sha256_state.available()


def will_take_up(path: Path, cache_dir: Path | None) -> bool:
    """Whether `cached_scan` of PATH will start from CACHE_DIR's entry (`takes_up`)."""
    return caches(cache_dir) and takes_up(path, cache_dir)


def takes_up(path: Path, cache_dir: Path) -> bool:
    """Whether CACHE_DIR's entry for PATH says it was read from this very file, which still
    starts with the bytes read (device, inode, size and samples, from the entry's header: a
    few reads, standard library only). The engine checks the whole entry again; this only
    tells `interfaces.prestart` that reading the file from the start will not be needed."""
    try:
        with entry_path(cache_dir, path).open("rb") as entry:
            if entry.read(len(FORMAT)) != FORMAT:
                return False
            header = entry.readline(HEADER_MAX_BYTES)
        device, inode, read_to, _ = header.split()
        with path.open("rb") as handle:
            fd = handle.fileno()
            status = os.fstat(fd)
            size = int(read_to)
            return ((status.st_dev, status.st_ino) == (int(device), int(inode))
                    and status.st_size >= size
                    and _header(status.st_dev, status.st_ino, size, _samples(fd, size)) == header)
    except (OSError, ValueError):
        return False


class _TooLarge(Exception):
    pass


class _Sink:
    """Where an entry is pickled to: the atomic file, digested on the way, size bounded."""

    def __init__(self, target: AtomicFile) -> None:
        self.target = target
        self.digest = hashlib.sha256()
        self.written = 0

    def write(self, data: bytes | pickle.PickleBuffer) -> int:
        # Large arrays come as the PickleBuffer itself (`array_pickle.ArrayPickler`), never copied.
        view = memoryview(data)
        self.written += view.nbytes
        if self.written > MAX_ENTRY_BYTES:
            raise _TooLarge
        self.digest.update(view)
        return self.target.write(view)


def _whole(opened: BinaryIO, size: int) -> bool:
    """Whether the entry's payload (after FORMAT, before the trailer) has its trailer's digest."""
    digest = hashlib.sha256()
    left = size - len(FORMAT) - TRAILER_BYTES
    opened.seek(len(FORMAT))
    while left > 0 and (chunk := opened.read(min(READ_BUFFER, left))):
        digest.update(chunk)
        left -= len(chunk)
    return opened.read() == b"\n" + digest.hexdigest().encode()


def _read_entry(entry: Path) -> object:
    """The object an entry holds, when it is a private regular file of ours, whole; None
    otherwise. Unpickled from the file (never held whole twice) by the restricted reader."""
    try:
        handle = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(handle, "rb", buffering=READ_BUFFER) as opened:
        status = os.fstat(handle)
        if (not is_private_file(status) or status.st_size > MAX_ENTRY_BYTES
                or opened.read(len(FORMAT)) != FORMAT
                or not _whole(opened, status.st_size)):
            return None
        opened.seek(len(FORMAT))
        opened.readline(HEADER_MAX_BYTES)  # the state repeats what the header says
        try:
            found: object = _Unpickler(opened).load()
        except Exception:  # a damaged entry can fail in any way while read: it is no entry
            return None
        return found if opened.tell() == status.st_size - TRAILER_BYTES else None


def _load(entry: Path, key: tuple[Any, ...], fd: int, size: int) -> ScanState | None:
    """The entry, when it is ours, whole, of this file and version, and the file still starts
    with what it was read from; None otherwise."""
    state = _read_entry(entry)
    if (not isinstance(state, ScanState) or state.key != key or size < state.read_to
            or _samples(fd, state.read_to) != state.samples):
        return None
    return state


def _save(entry: Path, rules: SpeechRules, fd: int, scanned: Scan,
          digest: FileDigest) -> None:
    """Keep what SCANNED read from FD's complete lines (never the torn last one); a cache that
    cannot be written is no error."""
    with contextlib.suppress(OSError, KaelError, _TooLarge, pickle.PicklingError, TypeError,
                             RecursionError):
        _write(entry, rules, fd, scanned, digest)


def _write(entry: Path, rules: SpeechRules, fd: int, scanned: Scan,
           digest: FileDigest) -> None:
    stats = scanned.stats
    read_to = stats.bytes_read - stats.torn_bytes
    resume = digest.state_at(read_to)
    if read_to <= 0 or resume is None:
        return
    kept = ReadStats(stats.lines - int(stats.torn_final_line), read_to,
                     list(stats.unreadable_lines))
    status = os.fstat(fd)
    samples = _samples(fd, read_to)
    state = ScanState(_key(status, rules), read_to, samples, *resume, scanned.read,
                      dict(scanned.tally), kept)
    entry.parent.mkdir(mode=0o700, exist_ok=True)
    with atomic_writer(entry, 0o600) as target:
        target.write(FORMAT)
        sink = _Sink(target)
        sink.write(_header(status.st_dev, status.st_ino, read_to, samples))
        array_pickle.dump_arrays(state, sink)
        target.write(b"\n" + sink.digest.hexdigest().encode())
    _prune(entry.parent)


def _prune(cache_dir: Path) -> None:
    """Remove the oldest entries past MAX_ENTRIES."""
    entries = sorted(cache_dir.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime_ns)
    for old in entries[:-MAX_ENTRIES]:
        old.unlink(missing_ok=True)


def _resume(path: Path, rules: SpeechRules, entry: Path) -> Scan | None:
    """The scan of PATH from its entry and the bytes after it, or None when there is none."""
    try:
        handle = path.open("rb", buffering=READ_BUFFER)
    except OSError:
        return None
    with handle:
        fd = handle.fileno()
        status = os.fstat(fd)
        state = _load(entry, _key(status, rules), fd, status.st_size)
        if state is None:
            return None
        size = status.st_size
        digest = FileDigest(fd, size, start=state.hashed_to, state=state.hash_state,
                            resumable=True)
        read, tally, stats = state.read, state.tally, state.stats
        later = ReadStats()
        read.classify_all(read_records(fd, state.read_to, size - state.read_to, later,
                                       settle=read.settle), tally, lines_before=stats.lines)
        stats.absorb(later)
        scanned = Scan(read, stats, digest.hexdigest(), tally)
        _save(entry, rules, fd, scanned, digest)
        return scanned


def cached_scan(path: Path, rules: SpeechRules, cache_dir: Path | None, *,
                parallel: bool | None = None, started: SecondHalf | None = None) -> Scan:
    """`scan`, taken up from CACHE_DIR's entry for PATH when it matches (see the module), and
    the entry renewed. CACHE_DIR None (no state dir), or no resumable SHA-256: a plain scan."""
    if not caches(cache_dir):
        return scan(path, rules, parallel=parallel, started=started)
    entry = entry_path(cache_dir, path)
    try:
        resumed = _resume(path, rules, entry)
    except (OSError, ValueError):  # an entry that cannot be taken up is no entry
        resumed = None
    if resumed is not None:
        if started is not None:
            started.cancel()
        return resumed
    return scan(path, rules, parallel=parallel, started=started, resumable=True,
                then=functools.partial(_save, entry, rules))
