"""Atomic, durable file writes: temporary file, fsync, rename, directory fsync."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import orjson


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600, *,
                       overwrite: bool = True) -> None:
    """Write DATA to PATH so that readers see the old file or the whole new one, never a part.

    With overwrite=False an existing PATH is never replaced (FileExistsError), checked by a
    hard link, which fails atomically when the name is taken.
    """
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            tmp.unlink()
        fsync_dir(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_json(path: Path, value: object, mode: int = 0o600, *,
                      overwrite: bool = True) -> None:
    data = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    atomic_write_bytes(path, data, mode, overwrite=overwrite)


def atomic_write_text(path: Path, text: str, mode: int = 0o600, *,
                      overwrite: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, overwrite=overwrite)
