"""Atomic, durable file writes: temporary file, fsync, rename, directory fsync.

A write that fails (disk full, I/O error) leaves nothing behind but what was there before, and
raises `StorageError` naming the file that was being written.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from .errors import StorageError

COPY_CHUNK = 1 << 20


def is_private_file(status: os.stat_result) -> bool:
    """Whether STATUS is of a regular file of this user that no one else may read or write
    (what the engine keeps for itself in the state dir: scan-cache entries, the checked
    config)."""
    return (stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid()
            and not status.st_mode & 0o077)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AtomicFile:
    """A file written piece by piece under a temporary name and published whole by `commit`.

    Readers see the old file or the whole new one, never a part. With overwrite=False an
    existing PATH is never replaced (FileExistsError), checked by a hard link, which fails
    atomically when the name is taken. `discard` (safe to call always) removes the temporary
    file of an uncommitted write.
    """

    def __init__(self, path: Path, mode: int = 0o600, *, overwrite: bool = True) -> None:
        self.path = path
        self.overwrite = overwrite
        self.committed = False
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                            dir=path.parent)
        except OSError as exc:
            raise StorageError.writing(path, exc) from None
        self.tmp = Path(tmp_name)
        self.handle: BinaryIO = os.fdopen(fd, "wb")
        try:
            os.fchmod(fd, mode)
        except OSError as exc:
            self.discard()
            raise StorageError.writing(path, exc) from None

    def write(self, data: bytes | memoryview) -> int:
        try:
            return self.handle.write(data)
        except OSError as exc:
            raise StorageError.writing(self.path, exc) from None

    def commit(self) -> None:
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            if self.overwrite:
                os.replace(self.tmp, self.path)
            else:
                os.link(self.tmp, self.path)
                self.tmp.unlink()
            self.committed = True
            fsync_dir(self.path.parent)
        except FileExistsError:
            raise
        except OSError as exc:
            raise StorageError.writing(self.path, exc) from None
        finally:
            self.discard()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.close()  # a failed flush of buffered bytes is moot: the file goes
        if not self.committed:
            with contextlib.suppress(FileNotFoundError):
                self.tmp.unlink()


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int = 0o600, *,
                  overwrite: bool = True) -> Iterator[AtomicFile]:
    """An `AtomicFile` committed when the block ends normally, discarded when it raises."""
    target = AtomicFile(path, mode, overwrite=overwrite)
    try:
        yield target
        target.commit()
    finally:
        target.discard()


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600, *,
                       overwrite: bool = True) -> None:
    """Write DATA to PATH atomically (see `AtomicFile`)."""
    with atomic_writer(path, mode, overwrite=overwrite) as target:
        target.write(data)


def atomic_copy(source: BinaryIO, path: Path, mode: int = 0o600, *,
                overwrite: bool = True) -> None:
    """Copy the open SOURCE to PATH atomically, a chunk at a time."""
    with atomic_writer(path, mode, overwrite=overwrite) as target:
        while chunk := source.read(COPY_CHUNK):
            target.write(chunk)


def atomic_write_json(path: Path, value: object, mode: int = 0o600, *,
                      overwrite: bool = True) -> None:
    data = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    atomic_write_bytes(path, data, mode, overwrite=overwrite)


def atomic_write_text(path: Path, text: str, mode: int = 0o600, *,
                      overwrite: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, overwrite=overwrite)
