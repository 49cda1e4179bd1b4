"""Where things are: the transcript a command works on, and which paths are safe to take."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError, Refused, UsageError

if TYPE_CHECKING:
    from .config import Config
    from .reading_settings import ReadingSettings

MANIFEST_SUFFIX = ".manifest.json"
MAX_PATH_BYTES = 4095  # Linux PATH_MAX, less the terminating NUL
MAX_NAME_BYTES = 255  # NAME_MAX
SHOWN_CHARS = 80


def require_path_text(text: str) -> None:
    """Refuse, with one sentence (ValueError), a path the kernel cannot take: one with a NUL,
    longer than PATH_MAX, or with a name longer than NAME_MAX."""
    if "\0" in text:
        raise ValueError("contains a NUL character")
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES:
        raise ValueError(f"is {size} bytes long; a path has at most {MAX_PATH_BYTES}")
    longest = max(len(name.encode("utf-8", "surrogateescape")) for name in text.split("/"))
    if longest > MAX_NAME_BYTES:
        raise ValueError(f"has a name of {longest} bytes; a name has at most {MAX_NAME_BYTES}")


def shown(text: str | os.PathLike[str]) -> str:
    """A path or word as a message names it: on one line, shortened when over-long."""
    words = repr(os.fspath(text))[1:-1]
    if len(words) <= SHOWN_CHARS:
        return words
    return f"{words[:SHOWN_CHARS]}... ({len(words)} characters)"


def is_candidate(path: Path) -> bool:
    """A candidate not yet activated sits beside its manifest."""
    return path.with_name(path.stem + MANIFEST_SUFFIX).exists()


def transcripts(project_dir: Path) -> list[Path]:
    """Session transcripts in PROJECT_DIR, newest first (by mtime, like `--continue`)."""
    found = [p for p in project_dir.glob("*.jsonl") if p.is_file() and not is_candidate(p)]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def resolve_transcript(config: Config | ReadingSettings,
                       path: str | os.PathLike[str] | None) -> Path:
    """The transcript to read: PATH checked against project_dir, or the newest one there."""
    return locate_transcript(config.project_dir, path)


def locate_transcript(project: Path, path: str | os.PathLike[str] | None) -> Path:
    """PATH checked against PROJECT (inside it, symlinks resolved, a regular file), or the
    newest transcript in PROJECT that is not a candidate."""
    if not project.is_dir():
        raise UsageError(f"project_dir {project} does not exist or is not a directory")
    if path is None:
        found = transcripts(project)
        if not found:
            raise InputError(f"no transcript (*.jsonl) in project_dir {project}")
        return found[0]
    try:
        require_path_text(os.fspath(path))
    except ValueError as exc:
        raise UsageError(f"transcript {shown(path)} {exc}") from None
    given = Path(path)
    if not given.is_absolute():
        given = Path.cwd() / given
    if not given.exists() and not given.is_symlink():
        raise UsageError(f"transcript {given} does not exist")
    real = given.resolve()
    if not real.is_relative_to(project.resolve()):
        what = "is a symlink that leads outside" if given.is_symlink() else "is outside"
        raise Refused(f"transcript {given} {what} project_dir {project}")
    if real.is_dir():
        raise UsageError(f"transcript {given} is a directory, not a JSONL file")
    if not real.is_file():
        raise UsageError(f"transcript {given} is not a regular file")
    return real
