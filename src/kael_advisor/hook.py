"""The `kael-advisor-hook` prompt hook (Claude Code `UserPromptSubmit`): records which Claude
Code conversation a window is in, so the MCP server can bind "this conversation".

It reads the event on stdin and writes `{session_id, cwd, written_at}` atomically to one small
file per window (`places.window_file`). It runs on every prompt, so it uses the standard library
only, prints nothing (a hook's stdout would reach the model) and never fails the prompt: any
error ends it with exit 0 and one line in `hook-errors.log` beside the windows' files.
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


def _field(event: object, name: str) -> str:
    value = event.get(name) if isinstance(event, dict) else None
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ValueError(f"the event has no usable {name!r}")
    return value


def record(raw: bytes, directory: Path) -> Path:
    """Write the window file for the event RAW into DIRECTORY; the path written."""
    event = json.loads(raw)
    session_id, cwd = _field(event, "session_id"), _field(event, "cwd")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / window_file(cwd, session_id)
    body = json.dumps({"session_id": session_id, "cwd": cwd, "written_at": time.time()})
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
