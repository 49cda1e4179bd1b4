"""The `kael-advisor-hook` prompt hook (Claude Code `UserPromptSubmit`): records which Claude
Code conversation a window is in, so the MCP server can bind "this conversation".

It reads the event on stdin and writes `{session_id, cwd, conversation, written_at}` atomically
to one small file per window (`places.window_file`). It runs on every prompt, so it uses the
standard library only, prints nothing (a hook's stdout would reach the model) and never fails the
prompt: any error ends it with exit 0 and one line in `hook-errors.log` beside the windows' files.

`conversation` is the session a rebuild lineage started from: a session rebuilt by
kael-thread-rebuild names its source in its first record (`kaelRebuild.sourceSessionId`), and
that source may itself be a rebuild. The hook follows those names through the transcripts' folder
when it first sees a session (bounded, cycle-safe) and keeps the answer in the window file, so
the advisor's binding follows the conversation across a switch and a rollback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from .places import HOOK_LOG, sessions_dir, window_file

MAX_EVENT_BYTES = 16 << 20
# The engine's marker and lineage key (kael_thread_rebuild.conversation.records: MARKER,
# SOURCE_SESSION); the hook imports nothing of the engine.
MARKER = "kaelRebuild"
SOURCE_SESSION = "sourceSessionId"
# A first record longer than this (a huge start-up snapshot) is not read: no lineage.
MAX_HEAD_BYTES = 4 << 20
MAX_HOPS = 32
MAX_WINDOW_BYTES = 64 << 10
_UUID_CHARACTERS = frozenset("0123456789abcdef-")


def _field(event: object, name: str) -> str:
    value = event.get(name) if isinstance(event, dict) else None
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ValueError(f"the event has no usable {name!r}")
    return value


def _session_name(value: object) -> str | None:
    """VALUE when it is a session id (a UUID: safe as a file name), else None."""
    if isinstance(value, str) and len(value) == 36 and set(value) <= _UUID_CHARACTERS:
        return value
    return None


def source_of(transcript: Path) -> str | None:
    """The session TRANSCRIPT was rebuilt from, as its first record names it; None when it
    names none or cannot be read."""
    try:
        with transcript.open("rb") as handle:
            head = handle.readline(MAX_HEAD_BYTES)
        first = json.loads(head) if head.endswith(b"\n") else None
    except (OSError, ValueError, RecursionError):
        return None
    marker = first.get(MARKER) if isinstance(first, dict) else None
    return _session_name(marker.get(SOURCE_SESSION)) if isinstance(marker, dict) else None


def root_of(session_id: str, transcript: Path) -> str:
    """The session the lineage of SESSION_ID (whose transcript is TRANSCRIPT) started from:
    its sources followed in TRANSCRIPT's folder, at most MAX_HOPS, never round a cycle."""
    seen, current, path = {session_id}, session_id, transcript
    for _ in range(MAX_HOPS):
        source = source_of(path)
        if source is None or source in seen:
            break
        seen.add(source)
        current, path = source, transcript.with_name(f"{source}.jsonl")
    return current


def _known(target: Path, session_id: str) -> str | None:
    """The conversation the window file TARGET already names for SESSION_ID, if any."""
    try:
        with target.open("rb") as handle:
            data = json.loads(handle.read(MAX_WINDOW_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("session_id") != session_id:
        return None
    conversation = data.get("conversation")
    return conversation if isinstance(conversation, str) and conversation else None


def _conversation(event: dict[str, object], session_id: str, target: Path) -> str:
    known = _known(target, session_id)
    if known is not None:
        return known
    transcript = event.get("transcript_path")
    if not isinstance(transcript, str) or not transcript or "\x00" in transcript:
        return session_id
    return root_of(session_id, Path(transcript))


def record(raw: bytes, directory: Path) -> Path:
    """Write the window file for the event RAW into DIRECTORY; the path written."""
    event = json.loads(raw)
    session_id, cwd = _field(event, "session_id"), _field(event, "cwd")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / window_file(cwd, session_id)
    conversation = _conversation(event, session_id, target)
    body = json.dumps({"session_id": session_id, "cwd": cwd, "conversation": conversation,
                       "written_at": time.time()})
    # Atomic without fsync: a window file lost in a crash is rewritten at the next prompt. The
    # temporary name is this process's own (no `tempfile`: its imports cost the hook's time).
    temporary = directory / f".{target.name}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def main() -> int:
    directory = sessions_dir()
    try:
        raw = sys.stdin.buffer.read(MAX_EVENT_BYTES + 1)
        if len(raw) > MAX_EVENT_BYTES:
            raise ValueError(f"the event is larger than {MAX_EVENT_BYTES} bytes")
        record(raw, directory)
    except Exception as exc:  # never fail the prompt: log and go on
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        with contextlib.suppress(Exception):  # nowhere left to say it: the prompt goes on
            from kael_thread_rebuild.logline import append_line

            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            append_line(directory / HOOK_LOG, f"kael-advisor-hook: not recorded ({reason})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
