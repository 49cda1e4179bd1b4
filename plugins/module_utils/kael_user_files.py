"""Files in places the Claude user can change. The installer runs as root and that user (a model's
shell) can change everything under its home, its state dir, its pointer dir and its project dir
between two runs: root never reads or writes there, following a path the user chose. The roles
run the modules that touch those places as that user (`become_user`); these checks make a module
run as root refuse such a place instead of following it, and make a file or directory of ours
that is a symlink fail with one line naming it."""

from __future__ import annotations

import errno
import os
import stat


def _not_roots(path: str) -> str | None:
    """The first existing component of PATH (absolute, walked without following symlinks) that
    another user could change: one not owned by root, or a directory every user may write to
    without the sticky bit."""
    parts = [part for part in path.split("/") if part]
    for prefix in ["/"] + ["/" + "/".join(parts[:end]) for end in range(1, len(parts) + 1)]:
        try:
            info = os.lstat(prefix)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{prefix} cannot be examined ({exc.strerror})"
        if info.st_uid != 0:
            return f"{prefix} belongs to uid {info.st_uid}"
        if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH \
                and not info.st_mode & stat.S_ISVTX:
            return f"{prefix} is writable by every user"
    return None


def root_refusal(path: str) -> str | None:
    """Why this process, when it is root, must not read or write PATH: a component of PATH or of
    the place it resolves to belongs to another user (one line naming it); None otherwise, and
    always None for a process that is not root (the kernel's permissions hold it)."""
    if os.geteuid() != 0:
        return None
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        found = _not_roots(candidate)
        if found is not None:
            return (f"{path}: {found}, a place root neither reads nor writes for another user; "
                    "run this as that user (become_user)")
    return None


def symlink_refusal(path: str, what: str) -> str | None:
    """One line when PATH, a file or directory of ours (WHAT names it), is a symlink."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{what} {path} cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return (f"{what} {path} is a symlink, which a file or directory of ours never is; "
                "remove it and run again (nothing was written)")
    return None


def open_ours(path: str, flags: int, mode: int = 0o600) -> int:
    """os.open of a file of ours, never through a symlink at its last component: a symlink raises
    OSError(ELOOP) naming PATH."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symlink, which a file of ours never is", path) from None
        raise


def read_as(uid: int, gid: int, path: str, limit: int = 1 << 20) -> bytes:
    """The first LIMIT bytes of PATH read as UID:GID (a forked child drops root's privileges
    first, so root reads only what that user could), or directly by a process that is not root
    or already is that user. OSError when that user cannot read it."""
    if os.geteuid() != 0 or uid == 0:
        with open(path, "rb") as handle:
            return handle.read(limit)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's result arrives through the pipe
        code = 1
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            with open(path, "rb") as handle:
                data = handle.read(limit)
            while data:
                data = data[os.write(writer, data):]
            code = 0
        except BaseException:  # the exit code carries the failure
            code = 1
        finally:
            os._exit(code)
    os.close(writer)
    chunks = []
    with os.fdopen(reader, "rb") as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)
    _pid, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(errno.EACCES, f"uid {uid} cannot read it", path)
    return b"".join(chunks)
