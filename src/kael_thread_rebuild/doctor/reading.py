"""Tolerant readers of what the checks look at: a file that is missing or unreadable is a
finding, never an exception."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson


def read_json(path: Path) -> tuple[Any, str]:
    """(data, "") or (None, the problem); a missing file is (None, "")."""
    try:
        return orjson.loads(path.read_bytes()), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"{path} cannot be read: {exc.strerror or exc}"
    except orjson.JSONDecodeError:
        return None, f"{path} is not valid JSON"


def json_dict(value: Any, key: str) -> dict[str, Any]:
    """VALUE[KEY] when VALUE is a mapping and that is one too; else {}."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def json_list(value: Any, key: str) -> list[Any]:
    """VALUE[KEY] when VALUE is a mapping and that is a list; else []."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


def tail(path: Path, size: int) -> str:
    """The last SIZE bytes of PATH as text, from the first whole line on."""
    with path.open("rb") as file:
        file.seek(0, os.SEEK_END)
        length = file.tell()
        file.seek(max(0, length - size))
        data = file.read()
    if length > size:
        data = data.partition(b"\n")[2]  # a cut first line is no line
    return data.decode("utf-8", "replace")


def read_cmdline(pid: int) -> list[str] | None:
    """The command line of process PID, or None when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = raw.split(b"\0")
    if words and words[-1] == b"":
        words.pop()
    return [word.decode("utf-8", "surrogateescape") for word in words] or None


def ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def lock_held(path: Path) -> bool | None:
    """Whether some process holds the flock on PATH; None when PATH is no lock file (none yet,
    or not a regular file).

    A lock held in another pid namespace (a sibling container) does not show in this one's
    `/proc/locks`, but the kernel refuses a conflicting lock on the same file through a bind
    mount all the same: so the lock is tried, shared and without waiting, on a read-only
    descriptor, and let go at once. Nothing is created or written; a daemon starting in that
    instant waits for it (`daemon.worker_lock`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
