"""Which Claude Code conversation the server serves now: the hook's window files whose cwd is
the server's project or an ancestor or descendant of it, the newest by mtime. A window's
conversation is the session its rebuild lineage started from (the hook finds it), else its own
session id.

A stale file left by a crash is always older than the live window's, so no timeout is needed;
two windows on one project write two files, and the one that spoke last is the one consulting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import AdvisorError
from .places import sessions_dir

MAX_WINDOW_FILE = 64 << 10


@dataclass(frozen=True)
class Window:
    session_id: str
    cwd: Path
    mtime: float
    conversation: str


def _related(one: Path, other: Path) -> bool:
    return one == other or one.is_relative_to(other) or other.is_relative_to(one)


def read_window(path: Path) -> Window | None:
    """The window file PATH, or None when it is not one (garbage, partial, unreadable)."""
    try:
        with path.open("rb") as handle:
            data = json.loads(handle.read(MAX_WINDOW_FILE))
            mtime = path.stat().st_mtime
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    session_id, cwd = data.get("session_id"), data.get("cwd")
    if not isinstance(session_id, str) or not session_id or not isinstance(cwd, str) \
            or not cwd.startswith("/"):
        return None
    conversation = data.get("conversation")
    if not isinstance(conversation, str) or not conversation:
        conversation = session_id  # written before the hook knew lineages
    return Window(session_id, Path(cwd), mtime, conversation)


def windows(project: Path, directory: Path | None = None) -> list[Window]:
    """The windows on PROJECT, newest first."""
    where = directory or sessions_dir()
    found = [window for path in where.glob("*.json")
             if (window := read_window(path)) is not None and _related(window.cwd, project)]
    return sorted(found, key=lambda window: window.mtime, reverse=True)


def current_conversation(project: Path, directory: Path | None = None) -> str:
    """The conversation of the window on PROJECT that spoke last (the key of its binding)."""
    found = windows(project, directory)
    if not found:
        where = directory or sessions_dir()
        raise AdvisorError(
            f"no Claude Code conversation found for {project} in {where}: is kael-advisor-hook "
            "installed as a UserPromptSubmit hook? (or name a task with task_id)")
    return found[0].conversation
