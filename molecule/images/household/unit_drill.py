"""The live drill of a household whose Claude Code runs as a systemd unit (Molecule side effect).

The unit runs `claude-start` (examples/systemd), which gives Claude Code a pseudo-terminal with
script(1) and sends its screen nowhere (`StandardOutput=null`). Nobody sits at that terminal; the
drill types into it as root with TIOCSTI (the root of a real host, or of this container with
CAP_SYS_ADMIN, may), one byte at a time, as keystrokes. With no screen to read, readiness comes
from Claude Code's own session registry and transcript, and the household answers no permission
prompt: it allowed the tools a unit needs in its own start flags (`--allowedTools`), since no
human could answer one there. Restarting "with --continue" is, for a unit, writing the running
session into the pointer that claude-start reads and restarting the unit.

drill.py runs this class for `--base systemd`; everything else is drill.py's.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
import termios
import time
import tomllib
from functools import cached_property
from typing import Any

from drill import Household, wait_until

#: How long Claude Code's input must have been quiet before typing: its TUI is up and reading.
SETTLE_SECONDS = 3.0


class UnitHousehold(Household):
    """A household whose Claude Code is the main program of a systemd unit (system or user)."""

    @cached_property
    def unit(self) -> dict[str, Any]:
        """The unit, its bus and its pointer, as the install wrote them into the config."""
        with open(self.config, "rb") as handle:
            config = tomllib.load(handle)
        return {"unit": config["systemd_unit"], "bus": config.get("systemd_bus", "system"),
                "pointer": config["resume_pointer_path"]}

    def systemctl(self, *args: str) -> str:
        """systemctl as the household runs it: root for a system unit, the user for its own."""
        if self.unit["bus"] == "user":
            uid = pwd.getpwnam(self.user).pw_uid
            return self.as_user("env", f"XDG_RUNTIME_DIR=/run/user/{uid}", "systemctl",
                                "--user", *args)
        done = subprocess.run(["systemctl", *args], capture_output=True, text=True, check=True,
                              timeout=60)
        return done.stdout

    def screen(self) -> str:
        """No screen reaches anybody: the unit's journal (claude-start's lines) instead."""
        try:
            unit = self.unit["unit"]
            user = self.unit["bus"] == "user"
        except (OSError, KeyError):
            return "(no config yet)"
        field = "_SYSTEMD_USER_UNIT" if user else "_SYSTEMD_UNIT"  # --user-unit adds _UID=0
        done = subprocess.run(["journalctl", "--no-pager", "-n", "30", f"{field}={unit}"],
                              capture_output=True, text=True, timeout=30, check=False)
        return done.stdout + done.stderr

    def terminal(self) -> str:
        entry = wait_until(self.live, 60, "a running Claude Code")
        return os.readlink(f"/proc/{entry['pid']}/fd/0")

    def type_line(self, text: str) -> None:
        fd = os.open(self.terminal(), os.O_RDWR | os.O_NOCTTY)
        try:
            for byte in text.encode():
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
            time.sleep(0.3)
            fcntl.ioctl(fd, termios.TIOCSTI, b"\r")
        finally:
            os.close(fd)

    def approve(self) -> None:
        """Nothing to answer: the unit's own flags allow the tools it uses."""

    def wait_ready(self, session: str | None = None, timeout: float = 90) -> str:
        def idle() -> str | None:
            entry = self.live()
            if entry is None or session not in (None, entry.get("sessionId")):
                return None
            return str(entry["sessionId"]) if entry.get("status") in (None, "idle") else None

        found = wait_until(idle, timeout, f"Claude Code to run session {session or '(any)'}")
        time.sleep(SETTLE_SECONDS)
        return found

    def restart_with_continue(self, start_command: str) -> None:
        """What the play's last message tells a systemd household: the running session into
        the pointer (as the unit's user, atomically), then restart the unit."""
        del start_command  # the unit's own flags are used on every start
        old = wait_until(self.live, 60, "a running Claude Code")
        pointer = self.unit["pointer"]
        self.as_user("sh", "-c", 'printf "%s\\n" "$1" >"$2.tmp" && mv "$2.tmp" "$2"', "sh",
                     str(old["sessionId"]), pointer)
        self.systemctl("restart", self.unit["unit"])
        wait_until(lambda: not os.path.exists(f"/proc/{old['pid']}"), 60,
                   "the old Claude Code to stop")
        self.wait_mcp_connected(self.wait_ready(str(old["sessionId"])))
