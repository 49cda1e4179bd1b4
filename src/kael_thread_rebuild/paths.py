"""Where things are: Claude Code's project-dir encoding and the transcript a command works on."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError, Refused, UsageError

if TYPE_CHECKING:
    from .config import Config

MANIFEST_SUFFIX = ".manifest.json"
_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]")


def _java_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit integer."""
    data = text.encode("utf-16-le")
    value = 0
    for index in range(0, len(data), 2):
        value = (value * 31 + (data[index] | data[index + 1] << 8)) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def encode_project_dir(workdir: str | os.PathLike[str]) -> str:
    """Claude Code's folder name for a working directory (of its physical path)."""
    path = str(workdir)
    name = _NON_ALNUM.sub("-", path)
    if len(name) <= 200:
        return name
    return f"{name[:200]}-{_base36(abs(_java_hash(path)))}"


def is_candidate(path: Path) -> bool:
    """A candidate not yet activated sits beside its manifest."""
    return path.with_name(path.stem + MANIFEST_SUFFIX).exists()


def transcripts(project_dir: Path) -> list[Path]:
    """Session transcripts in PROJECT_DIR, newest first (by mtime, like `--continue`)."""
    found = [p for p in project_dir.glob("*.jsonl") if p.is_file() and not is_candidate(p)]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def resolve_transcript(config: Config, path: str | os.PathLike[str] | None) -> Path:
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
