"""What the advisor's tests share: a project, the hook's directory and window files, and the
environment that points the advisor at them (and at a Kimi Code state of the test's own)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kael_advisor.places import window_file

BIN = Path(sys.executable).parent
HOOK_BIN = BIN / "kael-advisor-hook"
MCP_BIN = BIN / "kael-advisor-mcp"
CLI_BIN = BIN / "kael-advisor"


def write_window(sessions: Path, session_id: str, cwd: Path, when: float | None = None) -> Path:
    """A window file as the hook writes it (mtime WHEN, default now)."""
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / window_file(str(cwd), session_id)
    path.write_text(json.dumps({"session_id": session_id, "cwd": str(cwd),
                                "written_at": time.time()}))
    if when is not None:
        os.utime(path, (when, when))
    return path


def prompt(sessions: Path, session_id: str, cwd: Path) -> None:
    """What Claude Code does at a prompt: the real hook, given its UserPromptSubmit event."""
    event = {"session_id": session_id, "cwd": str(cwd), "hook_event_name": "UserPromptSubmit",
             "prompt": "hello", "transcript_path": "/nonexistent.jsonl"}
    done = subprocess.run([str(HOOK_BIN)], input=json.dumps(event).encode(),
                          env={**os.environ, "KAEL_ADVISOR_SESSIONS": str(sessions)},
                          capture_output=True, timeout=60, check=True)
    assert done.stdout == b""


def running_in(project: Path) -> list[int]:
    """The processes whose working directory is PROJECT (the Kimi Code CLI renames its command
    line to `kimi-code`, so it is found by where it runs)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cwd").readlink() == project:
                found.append(int(entry.name))
    return found
