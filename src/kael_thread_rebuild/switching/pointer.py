"""The pointer base: a runner loop runs `claude -p --resume "$(cat pointer)"`; switching rewrites
the pointer file. Nothing is killed; the next call of the runner picks the new session up.

The file holds one session id and a newline. It is replaced atomically (temporary file in the
same directory, fsync, rename, directory fsync), keeping the permission bits of the file it
replaces; a new file gets 0600. The rename gives the file to the writing uid, which is the Claude
user's (the appliance runs as that uid). A symlink is refused: the rename would replace the link
itself, not the file the runner reads through it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from importlib import resources
from pathlib import Path

from ..config import Config
from ..errors import KaelError, Refused
from ..fsutil import atomic_write_text
from .base import Identity, StepHook

NEW_POINTER_MODE = 0o600
RUNNER_SCRIPT = "pointer_runner.sh"

_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                         re.IGNORECASE)


class PointerError(KaelError):
    """The pointer file cannot be read or written."""


def session_in(content: bytes) -> str | None:
    """The session id a pointer's content names: exactly one UUID, surrounding blanks allowed."""
    try:
        text = content.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    return text if _SESSION_ID.fullmatch(text) else None


def _refuse_symlink(path: Path) -> None:
    try:
        linked = path.is_symlink()
    except OSError as exc:  # a parent dir that cannot be searched
        raise PointerError(f"pointer file {path} cannot be reached: {exc.strerror}") from None
    if linked:
        raise PointerError(f"pointer file {path} is a symlink; configure the real file's path")


def read_pointer(path: Path) -> bytes:
    _refuse_symlink(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise PointerError(f"pointer file {path} does not exist") from None
    except OSError as exc:
        raise PointerError(f"pointer file {path} cannot be read: {exc.strerror}") from None


def write_pointer(path: Path, session_id: str) -> None:
    if _SESSION_ID.fullmatch(session_id) is None:
        raise Refused(f"refusing to write {session_id!r} to the pointer file: not a session id")
    _refuse_symlink(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = NEW_POINTER_MODE
    except OSError as exc:
        raise PointerError(f"pointer file {path} cannot be read: {exc.strerror}") from None
    try:
        atomic_write_text(path, f"{session_id}\n", mode)
    except OSError as exc:
        raise PointerError(f"pointer file {path} cannot be written: {exc.strerror}") from None


def replace_problem(path: Path) -> str:
    """Why `write_pointer` could not replace PATH from this uid, in one line; empty when it can.

    PATH must be a regular file (or not exist yet), never a symlink, in a directory this uid may
    write and search: the new content is renamed over the file. In a sticky directory (`/tmp`)
    the file or the directory must be this uid's too."""
    try:
        info: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return f"pointer file {path} cannot be reached: {exc.strerror}"
    if info is not None and stat.S_ISLNK(info.st_mode):
        return f"pointer file {path} is a symlink; configure the real file's path"
    if info is not None and not stat.S_ISREG(info.st_mode):
        return f"pointer file {path} is not a regular file"
    directory, uid = path.parent, os.geteuid()
    try:
        folder = directory.stat()
    except OSError as exc:
        return f"the pointer's directory {directory} cannot be reached: {exc.strerror}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return (f"the pointer's directory {directory} is not writable by uid {uid}: a switch "
                "replaces the pointer file by a rename there")
    if (info is not None and folder.st_mode & stat.S_ISVTX
            and uid not in (0, info.st_uid, folder.st_uid)):
        return (f"pointer file {path} belongs to uid {info.st_uid} in the sticky directory "
                f"{directory}: uid {uid} cannot replace it")
    return ""


def point_back(path: Path, session_id: str) -> None:
    """Make the pointer name SESSION_ID again, unless it already does (a switch given up
    before its restart: the pointer may or may not have been written)."""
    try:
        if session_in(read_pointer(path)) == session_id:
            return
    except PointerError:
        pass  # gone or unreadable: writing it says why, if it cannot be written either
    write_pointer(path, session_id)


def runner_script() -> str:
    """The text of the reference runner shipped with the package."""
    return (resources.files(__package__) / RUNNER_SCRIPT).read_text(encoding="utf-8")


class PointerBase:
    name = "pointer"

    def __init__(self, config: Config) -> None:
        if config.resume_pointer_path is None:
            raise Refused("the pointer base needs resume_pointer_path in the config")
        self.path = config.resume_pointer_path

    def identity(self) -> Identity:
        content = read_pointer(self.path)
        return Identity(base=self.name, token={"sha256": hashlib.sha256(content).hexdigest()},
                        running_session_id=session_in(content))

    def alive(self) -> bool:
        try:
            return session_in(read_pointer(self.path)) is not None
        except PointerError:
            return False

    def switch_to(self, session_id: str, step: StepHook | None = None) -> list[str]:
        write_pointer(self.path, session_id)
        return [session_id]

    def abandon_switch(self, session_id: str) -> None:
        """Nothing to undo: the pointer is all a switch changes, and it did not change."""

    def running_session(self) -> str | None:
        try:
            return session_in(read_pointer(self.path))
        except PointerError:
            return None

    def start_problem(self, session_id: str) -> str:
        """The runner starts Claude Code with its own command; nothing to check from here."""
        return ""

    def stopped_from_outside(self) -> str:
        """The runner's loop starts and ends each call itself: nothing to tell."""
        return ""

    def restarting(self) -> bool:
        return False

    def activation_problem(self) -> str:
        return replace_problem(self.path)

    def switch_done(self) -> None:
        """Nothing to undo: the pointer is all a switch changes."""
