"""Where things are: Claude Code's project-dir encoding and the transcript a command works on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from . import claude_cli
from .errors import InputError, Refused, UsageError

if TYPE_CHECKING:
    from .config import Config

MANIFEST_SUFFIX = ".manifest.json"
def encode_project_dir(workdir: str | os.PathLike[str]) -> str:
    """Claude Code's folder name for a working directory (of its physical path)."""
    return claude_cli.encode_project_dir(str(workdir))


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
