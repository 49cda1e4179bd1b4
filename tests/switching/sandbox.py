"""Test helpers: a private tmux server and configs that can only reach the test's own sandbox.

Every tmux server here listens on `-L kael-test-DO-NOT-CREATE-<random>`, every session name
contains `DO-NOT-CREATE`, and the server starts with a small, known environment (no `TMUX`), so
tests can see exactly what a respawned pane inherits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kael_thread_rebuild.config import Config
from tests.guard import MARK, TEST_SOCKET_PREFIX

T = TypeVar("T")

#: A pane command that stays up and ignores any further arguments.
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
    }


class PrivateTmux:
    """A tmux server on a private socket, killed on exit (use as a context manager)."""

    def __init__(self, home: Path) -> None:
        self.tag = uuid.uuid4().hex[:10]
        self.socket = f"{TEST_SOCKET_PREFIX}{MARK}-{self.tag}"
        self.env = base_env(home)
        self._count = 0

    def __enter__(self) -> PrivateTmux:
        return self

    def __exit__(self, *exc: object) -> None:
        socket = self.run("display-message", "-p", "#{socket_path}", check=False).stdout.strip()
        self.run("kill-server", check=False)
        if socket:
            Path(socket).unlink(missing_ok=True)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if "-t" in args:
            target = args[args.index("-t") + 1]
            if MARK not in target and not target.startswith("%"):
                raise ValueError(f"refusing to address tmux target {target!r}")
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                              env=self.env, capture_output=True, text=True, timeout=30,
                              check=check)

    def new_session(self, command: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str] | None = None, remain_on_exit: bool = True) -> str:
        """Starts COMMAND in a new session; returns the target `<session>:0.0`."""
        self._count += 1
        name = f"{MARK}-{self.tag}-{self._count}"
        env_args = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        self.run("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(cwd),
                 *env_args, *command)
        if remain_on_exit:
            self.run("set-option", "-t", name, "remain-on-exit", "on")
        return f"{name}:0.0"

    def display(self, target: str, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", target, fmt).stdout.strip()

    def capture(self, target: str) -> str:
        return self.run("capture-pane", "-p", "-t", target).stdout


def safe_config(root: Path, **overrides: Any) -> Config:
    """A config whose every target and path lies in ROOT or is marked `DO-NOT-CREATE`."""
    data: dict[str, Any] = {
        "project_dir": root / "project-dir",
        "state_dir": root / "state",
        "claude_workdir": root / "work",
        "claude_config_dir": root / "claude-config",
        "tmux_target": f"{MARK}-unused:0.0",
        "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-unused",
        "resume_pointer_path": root / "pointer",
    }
    data.update(overrides)
    return Config.model_validate(data)


def tmux_config(tmux: PrivateTmux, target: str, root: Path, **overrides: Any) -> Config:
    return safe_config(root, tmux_socket=tmux.socket, tmux_target=target, **overrides)


def wait_until(probe: Callable[[], T | None], timeout: float = 20.0,
               interval: float = 0.1, what: str = "condition") -> T:
    """Polls PROBE until it returns something truthy, and returns that."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def cmdline(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [word.decode() for word in raw.split(b"\0")[:-1]]


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode().partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def write_minimal_session(project_dir: Path, session_id: str) -> Path:
    """A hand-written two-record session that Claude Code 2.1.328 resumes (facts §0.1)."""
    user, assistant = str(uuid.uuid4()), str(uuid.uuid4())
    records = [
        {"type": "user", "uuid": user, "parentUuid": None,
         "timestamp": "2026-11-29T10:00:00.000Z",
         "message": {"content": "Please remember the number 7391."}},
        {"type": "assistant", "uuid": assistant, "parentUuid": user,
         "timestamp": "2026-11-29T10:00:01.000Z",
         "message": {"content": "OK, I will remember 7391."}},
    ]
    project_dir.mkdir(parents=True, exist_ok=True)
    path = project_dir / f"{session_id}.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    path.chmod(0o600)
    return path
