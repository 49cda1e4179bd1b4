"""Where the advisor's files are and which environment names them: the hook's directory, the
project's table and consultations, the Kimi Code CLI. Standard library only (the hook uses it)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SESSIONS_ENV = "KAEL_ADVISOR_SESSIONS"
KIMI_ENV = "KAEL_ADVISOR_KIMI"
IDLE_ENV = "KAEL_ADVISOR_IDLE_SECONDS"
KIMI_HOME_ENV = "KIMI_CODE_HOME"
CLAUDE_CONFIG_ENV = "CLAUDE_CONFIG_DIR"

SESSIONS_FOLDER = "kael-advisor-sessions"
HOOK_LOG = "hook-errors.log"
DEFAULT_IDLE_SECONDS = 30.0

AGENT_DIR = ".agent"
TABLE_NAME = "advisor-tasks.json"
CONSULTATIONS_FOLDER = "advisor-consultations"


def claude_config_dir() -> Path:
    """Claude Code's config directory: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    return Path(os.environ.get(CLAUDE_CONFIG_ENV) or str(Path.home() / ".claude")).expanduser()


def sessions_dir() -> Path:
    """The hook's directory: $KAEL_ADVISOR_SESSIONS, else a folder of its own in Claude Code's
    config directory."""
    given = os.environ.get(SESSIONS_ENV)
    if given:
        return Path(given).expanduser()
    return claude_config_dir() / SESSIONS_FOLDER


def window_file(cwd: str, session_id: str) -> str:
    """The name of one window's file: a hash of its cwd and the session id's first 8
    characters (made safe for a file name)."""
    where = hashlib.sha256(cwd.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    head = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_"
                   for c in session_id[:8])
    return f"{where}-{head}.json"


def kimi_program() -> str:
    return os.environ.get(KIMI_ENV) or "kimi"


def kimi_home() -> Path:
    """The Kimi Code CLI's home as the advisor runs it: $KIMI_CODE_HOME, else Kimi's default."""
    return Path(os.environ.get(KIMI_HOME_ENV) or Path.home() / ".kimi-code").expanduser()


def idle_seconds() -> float:
    """How long the advisor may stay silent before its run counts as hung."""
    try:
        value = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_SECONDS))
    except ValueError:
        return DEFAULT_IDLE_SECONDS
    return value if value > 0 else DEFAULT_IDLE_SECONDS


def agent_dir(project: Path) -> Path:
    return project / AGENT_DIR


def table_path(project: Path) -> Path:
    return agent_dir(project) / TABLE_NAME


def consultations_dir(project: Path) -> Path:
    return agent_dir(project) / CONSULTATIONS_FOLDER
