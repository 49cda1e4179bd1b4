"""Which Claude Code a household runs, from what it wrote itself or from its program.

Three witnesses, each read-only: the live process's own session registry entry
(`sessions/<pid>.json` carries `version`), the `version` Claude Code stamps on every record of the
transcript it writes, and `<program> --version` of the program a switch would start (when
resume_command names it by an absolute path).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict

from . import versions
from .command_line import program_index
from .versions import VERSION_PATTERN

#: How much of the end of a transcript is read for its newest `version` stamp.
TRANSCRIPT_TAIL_BYTES = 1024 * 1024
PROGRAM_TIMEOUT_SECONDS = 10.0
_VERSION_WORD = re.compile(VERSION_PATTERN.strip("^$"))
VERIFY_COMMAND = ".ci/check-newest-claude --binary {program}"
UNKNOWN = ("not known from here: no live registry entry names a version, the newest transcript "
           "has no version stamp, and resume_command names no absolute program that runs here")


class Sighting(BaseModel):
    """One version and where it was seen."""

    model_config = ConfigDict(frozen=True)

    version: str
    where: str

    @property
    def verified(self) -> bool:
        return versions.lookup(self.version) is not None


def _version_of(value: object) -> str | None:
    return value if isinstance(value, str) and re.fullmatch(VERSION_PATTERN, value) else None


def registry_version(claude_config_dir: Path, pid: int) -> str | None:
    """The `version` the live process wrote in its session registry entry."""
    try:
        data = orjson.loads((claude_config_dir / "sessions" / f"{pid}.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return _version_of(data.get("version")) if isinstance(data, dict) else None


def transcript_version(path: Path) -> str | None:
    """The `version` on the last stamped record of a transcript (the Claude Code that wrote
    last). A cut first line of the tail is skipped."""
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - TRANSCRIPT_TAIL_BYTES))
            tail = file.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        found = _version_of(record.get("version")) if isinstance(record, dict) else None
        if found:
            return found
    return None


def resume_program(command: Sequence[str]) -> str | None:
    """The Claude Code program of a resume command when it is named by an absolute path (as the
    installer writes it). A bare `claude` is left alone: which one it is depends on the PATH of
    whatever starts it, which doctor cannot see."""
    index = program_index(command)
    word = command[index] if index is not None else None
    return word if word is not None and os.path.isabs(word) else None


def program_version(program: Path) -> str | None:
    """`<program> --version`'s version word; None when it does not answer with one."""
    env = {**os.environ, "DISABLE_AUTOUPDATER": "1"}
    try:
        out = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, env=env, check=False,
                             timeout=PROGRAM_TIMEOUT_SECONDS).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_WORD.search(out)
    return match.group(0) if match else None


def sightings(claude_config_dir: Path, pid: int | None, transcript: Path | None,
              resume_command: Sequence[str]) -> tuple[list[Sighting], str | None]:
    """What each witness says, and resume_command's absolute program (named even where it does
    not run, e.g. from a container)."""
    seen = []
    if pid is not None:
        found = registry_version(claude_config_dir, pid)
        if found:
            seen.append(Sighting(version=found, where=f"live process pid {pid}"))
    if transcript is not None and not seen:
        found = transcript_version(transcript)
        if found:
            seen.append(Sighting(version=found, where=f"wrote {transcript.name}"))
    program = resume_program(resume_command)
    if program is not None and os.access(program, os.X_OK) and os.path.isfile(program):
        found = program_version(Path(program))
        if found:
            seen.append(Sighting(version=found, where=f"{program} --version"))
    return seen, program


def describe(seen: Sequence[Sighting]) -> tuple[str, bool]:
    """The doctor's line for SEEN (not empty), and whether every version in it is verified."""
    shown = "; ".join(f"{s.version} ({s.where})" for s in seen)
    unverified = sorted({s.version for s in seen if not s.verified})
    if unverified:
        listed = ", ".join(entry.version for entry in versions.verified())
        return (f"Claude Code {shown}: {', '.join(unverified)} not verified by this project "
                f"(verified: {listed})"), False
    entry = versions.lookup(seen[0].version)
    checked = f"verified {entry.verified} ({', '.join(entry.checked)})" if entry else "verified"
    return f"Claude Code {shown}: {checked}", True


def verify_hint(program: str | None) -> str:
    """The command that verifies a version on this household (from a checkout of the project)."""
    shown = program if program is not None else '"$(command -v claude)"'
    return (f"from a checkout of kael-thread-rebuild on this household run "
            f"`{VERIFY_COMMAND.format(program=shown)}`: it generates every fixture with this "
            "binary against a loopback stand-in API, runs the fidelity tests and the tmux drill "
            f"on them and shows what changed since {versions.newest().version} "
            "(docs/claude-code-versions.md)")
