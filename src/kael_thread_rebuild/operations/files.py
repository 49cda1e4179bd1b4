"""File facts the worker relies on: digests, stability samples, the backup copy, transcript
snapshots of the project dir; and `confined`, through which every path built from a record field
goes."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import Refused
from ..fsutil import atomic_writer, fsync_dir
from ..transcript.reader import LONG_LINE, loads_line
from ..transcript.skeleton import loads_long_line

CHUNK = 1 << 20


class UnsafePath(Refused):
    """A record field that would lead a path outside the directory it belongs in."""


def confined(directory: Path, name: str | os.PathLike[str]) -> Path:
    """DIRECTORY / NAME, refused unless it lies directly inside DIRECTORY.

    NAME is a file name, or a path whose folder is DIRECTORY (symlinks resolved, so that
    a record written with the real path still matches). The last component is not resolved:
    removing or replacing it acts on the entry inside DIRECTORY, never on what it points to.
    """
    given = os.fspath(name)
    base = os.path.basename(given)
    folder = os.path.dirname(given)
    if (not base or base in (".", "..") or "\0" in given
            or (folder and (not os.path.isabs(folder)
                            or os.path.realpath(folder) != os.path.realpath(directory)))):
        raise UnsafePath(f"refused path {given[:200]!r}: it is not a file directly in "
                         f"{directory}")
    return directory / base


@dataclass(frozen=True, slots=True)
class FileSample:
    size: int
    mtime_ns: int
    sha256: str


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sample_file(path: Path) -> FileSample:
    before = path.stat()
    digest = sha256_file(path)
    after = path.stat()
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        digest = ""  # written while hashing: never equal to another sample
    return FileSample(after.st_size, after.st_mtime_ns, digest)


def wait_stable(path: Path, samples: int, interval: float, timeout: float,
                sleep: Callable[[float], None] = time.sleep,
                first: tuple[FileSample, float] | None = None) -> FileSample:
    """Wait until SAMPLES consecutive samples, INTERVAL apart, are equal (size, mtime, digest).

    FIRST is a sample already taken and when (`time.monotonic()`), e.g. by `copy_sampled`: the
    next one is taken INTERVAL after it, however the time in between was spent."""
    deadline = time.monotonic() + timeout
    last, taken = first if first is not None else (sample_file(path), time.monotonic())
    equal = 1
    while equal < samples:
        if time.monotonic() >= deadline:
            raise Refused(f"the transcript {path.name} did not stay unchanged for {samples} "
                          f"samples within {timeout:g} s")
        sleep(max(taken + interval - time.monotonic(), 0.0))
        current, taken = sample_file(path), time.monotonic()
        equal = equal + 1 if current == last and current.sha256 else 1
        last = current
    return last


def wait_for_file(path: Path, timeout: float, interval: float,
                  sleep: Callable[[float], None] = time.sleep) -> bool:
    """Whether PATH exists, waiting up to TIMEOUT for it to appear (Claude Code 2.1.328 can
    create a new session's transcript only after the first turn's Stop hook returned)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        sleep(interval)
    return True


STOP_SUMMARY = "stop_hook_summary"
_CONVERSATION = frozenset({"user", "assistant"})
# Cheap byte tests before parsing a line read from the end: only these can end the search.
_MARKERS = (b'"type":"user"', b'"type":"assistant"', b'"stop_hook_summary"')


def stop_summary_written(path: Path) -> bool:
    """Whether the last turn's Stop is closed in PATH: Claude Code writes a `system` record of
    subtype `stop_hook_summary` only after every Stop hook returned, after the turn's last
    `user`/`assistant` record (then `turn_duration`, `cost-state`, `last-prompt` in an
    interactive session). True when such a record follows the last conversation record.

    Reads complete lines from the end, so the cost is the turn's tail, not the transcript; a
    long line (a command's output of hundreds of MB) is held once and read by its skeleton, its
    long strings never decoded.
    """
    with path.open("rb") as handle:
        for start, line in _complete_lines_backward(handle):
            if not any(marker in line for marker in _MARKERS):
                continue
            try:
                record = (loads_long_line(line, handle.fileno(), start)
                          if len(line) > LONG_LINE else loads_line(line))
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            kind = record.get("type")
            if kind == "system" and record.get("subtype") == STOP_SUMMARY:
                return True
            if kind in _CONVERSATION:
                return False
    return False


def _complete_lines_backward(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The newline-terminated lines of HANDLE (where each starts, its bytes without the
    newline), last first; the unterminated tail (a write in progress) is skipped. A line longer
    than a read is read again whole once its start is found, so it is held once."""
    pos = handle.seek(0, os.SEEK_END)
    line_end: int | None = None  # the newline ending the line whose start is looked for
    while pos > 0:
        step = min(CHUNK, pos)
        pos -= step
        handle.seek(pos)
        chunk = handle.read(step)
        cut = len(chunk)
        while (newline := chunk.rfind(b"\n", 0, cut)) >= 0:
            if line_end is not None:
                yield pos + newline + 1, _line(handle, chunk, pos, pos + newline + 1, line_end)
            line_end, cut = pos + newline, newline
    if line_end is not None:
        yield 0, _line(handle, b"", 0, 0, line_end)


def _line(handle: BinaryIO, chunk: bytes, chunk_at: int, start: int, end: int) -> bytes:
    """The bytes from START to END: from CHUNK (read at CHUNK_AT) when it holds them all."""
    if end - chunk_at <= len(chunk):
        return chunk[start - chunk_at:end - chunk_at]
    handle.seek(start)
    return handle.read(end - start)


def copy_private(source: Path, dest: Path) -> FileSample:
    """Copy SOURCE to DEST atomically with mode 0600, streaming; returns the copy's facts.

    Same protocol as `fsutil.atomic_write_bytes` (temp file, fsync, rename, dir fsync) but
    without holding the file in memory: transcripts can be hundreds of MB. A failed write
    raises `StorageError` naming DEST; a failed read, OSError.
    """
    digest = hashlib.sha256()
    size = 0
    with atomic_writer(dest, 0o600) as out, source.open("rb") as src:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return FileSample(size, dest.stat().st_mtime_ns, digest.hexdigest())


def copy_sampled(source: Path, dest: Path) -> tuple[FileSample, float]:
    """`copy_private`, and the copy read as a stability sample of SOURCE (its size and mtime,
    the digest of the bytes copied; no digest when SOURCE changed during the copy, so that it
    equals no other sample), with when it was taken (`time.monotonic()`)."""
    before = source.stat()
    copy = copy_private(source, dest)
    after = source.stat()
    taken = time.monotonic()
    unchanged = ((before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns)
                 and copy.size == after.st_size)
    return FileSample(after.st_size, after.st_mtime_ns, copy.sha256 if unchanged else ""), taken


def move_private(source: Path, dest: Path) -> None:
    """Move SOURCE to DEST (never replacing DEST): a rename, or across file systems (two bind
    mounts of a container count) a streamed atomic copy, then SOURCE removed."""
    if dest.exists():
        raise FileExistsError(errno.EEXIST, "already exists", str(dest))
    try:
        os.rename(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy_private(source, dest)
        source.unlink()
    fsync_dir(dest.parent)
    fsync_dir(source.parent)


TranscriptSnapshot = dict[str, tuple[int, int]]


def snapshot_transcripts(project_dir: Path) -> TranscriptSnapshot:
    """`<name>.jsonl` → (size, mtime_ns) for every transcript directly in PROJECT_DIR."""
    snapshot: TranscriptSnapshot = {}
    for path in project_dir.glob("*.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            st = path.stat()
            snapshot[path.name] = (st.st_size, st.st_mtime_ns)
    return snapshot


def changed_transcripts(before: TranscriptSnapshot, after: TranscriptSnapshot,
                        ignore: set[str]) -> list[str]:
    """Names that appeared or changed between the two snapshots, except IGNORE."""
    return sorted(name for name, facts in after.items()
                  if name not in ignore and before.get(name) != facts)


def remove_with_temps(paths: list[Path]) -> None:
    """Remove each file and any temporary file a killed atomic write left beside it."""
    touched = set()
    for path in paths:
        for victim in [path, *path.parent.glob(f".{glob.escape(path.name)}.*.tmp")]:
            with contextlib.suppress(FileNotFoundError):
                victim.unlink()
                touched.add(victim.parent)
    for directory in touched:
        fsync_dir(directory)
