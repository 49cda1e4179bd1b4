"""Writing a file of the Claude user's as that user: a backup of ours first, then the new text
put in place atomically with the old owner, group and mode. Shared by the modules that merge into
the user's files (claude_settings, claude_settings_block, kimi_config, marked_block)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from typing import Any

from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import (
    open_ours,
    symlink_refusal,
)


def make_dir(directory: str) -> None:
    """DIRECTORY, created with mode 0700 by the user this runs as when missing; never a symlink."""
    if not os.path.lexists(directory):
        os.makedirs(directory, mode=0o700)
    problem = symlink_refusal(directory, "the directory")
    if problem is not None:
        raise OSError(errno.ELOOP, problem)


def backup(path: str, raw: bytes, backup_dir: str | None) -> str:
    """A copy of PATH's bytes RAW (mode 0600, its times kept), a new file of ours."""
    info = os.stat(path)
    directory = backup_dir or os.path.dirname(path)
    make_dir(directory)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    name = f"{os.path.basename(path)}.{stamp}.{os.getpid()}"
    for attempt in range(100):  # two changes within a second get two backups
        target = os.path.join(directory, f"{name}{f'.{attempt}' if attempt else ''}.bak")
        try:
            handle = open_ours(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free backup name", target)
    with os.fdopen(handle, "wb") as out:
        out.write(raw)
        out.flush()
        os.fsync(out.fileno())
        os.utime(out.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))
    return target


def write(module: Any, path: str, text: str, new_mode: int = 0o600) -> None:
    """Replace PATH atomically, keeping its owner, group and mode (a new file belongs to the user
    this runs as, mode NEW_MODE)."""
    directory = os.path.dirname(path)
    new = not os.path.exists(path)
    mode = new_mode if new else stat.S_IMODE(os.stat(path).st_mode)
    handle, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                    dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            if not new:  # the kernel refuses a change of owner this user may not make
                info, mine = os.stat(path), os.fstat(out.fileno())
                if (info.st_uid, info.st_gid) != (mine.st_uid, mine.st_gid):
                    os.fchown(out.fileno(), info.st_uid, info.st_gid)
            os.fchmod(out.fileno(), mode)
        module.atomic_move(temp, path)
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)
    if new:  # atomic_move gives a new file the umask's mode
        os.chmod(path, mode)


def read_text(path: str) -> tuple[bytes, str]:
    """PATH's bytes and UTF-8 text; a missing file is empty."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return b"", ""
    return raw, raw.decode("utf-8")
