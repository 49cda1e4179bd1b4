"""The installer puts the running session into an empty pointer (systemd base) before anything
restarts, so that the unit's next start resumes the conversation instead of starting a blank
session. Over a real connection: Ansible as root in a household container whose Claude user
(`household`, uid 1000) is not root runs the roles after detection with what kael_detect found
(a unit running SESSION, its pointer in the user's dir). The pointer is written as that user,
atomically; one that names a session already is left alone; one the user made a symlink fails
the host with one line and nothing is written through it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import UID, SudoHousehold, claude_instance, sudo_household
from .test_installer_access import _playbook
from .test_installer_symlinks import PLAY, _failures, _item

SESSION = str(uuid.uuid4())


def _systemd_item(item: dict[str, Any], pointer: Path) -> dict[str, Any]:
    return {**item, "base": "systemd", "session_id": SESSION,
            "config": {**item["config"], "activation": "systemd",
                       "systemd_unit": "claude-DO-NOT-CREATE.service",
                       "resume_pointer_path": str(pointer)}}


def _owner_and_mode(home: SudoHousehold, path: Path) -> list[str]:
    return home.run("stat", "-c", "%u %a", str(path)).stdout.decode().split()


def _install(tmp_path: Path, home: SudoHousehold, item: dict[str, Any]) -> tuple[int, str]:
    done = _playbook(tmp_path, home, item, "present", PLAY, kael_appliance_enabled=False)
    return done.returncode, done.stdout + done.stderr


def test_an_empty_pointer_gets_the_running_session_as_the_claude_user(
        tmp_path: Path, appliance: engine.Instance) -> None:
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    pointer = claude.home / "claude-session" / "pointer"
    item = _systemd_item(_item(appliance.name, claude, config_path, config.state_dir), pointer)
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        assert home.as_claude("mkdir", "-m", "0700", str(pointer.parent)).returncode == 0
        code, out = _install(tmp_path, home, item)  # no pointer yet
        assert code == 0, out[-4000:]
        assert pointer.read_text() == f"{SESSION}\n"
        assert _owner_and_mode(home, pointer) == [str(UID), "600"]

        # An empty one (an older start script left it so): written, its mode kept.
        assert home.as_claude("sh", "-c", f": > {pointer} && chmod 640 {pointer}").returncode == 0
        code, out = _install(tmp_path, home, item)
        assert code == 0, out[-4000:]
        assert pointer.read_text() == f"{SESSION}\n"
        assert _owner_and_mode(home, pointer) == [str(UID), "640"]
        assert [p.name for p in pointer.parent.iterdir()] == ["pointer"]  # no temporary left

        # A pointer that names a session (the start script's, or a switch's) is left alone.
        other = str(uuid.uuid4())
        pointer.write_text(f"{other}\n")
        code, out = _install(tmp_path, home, item)
        assert code == 0, out[-4000:]
        assert pointer.read_text() == f"{other}\n"

        # The user makes the pointer a symlink to a file of root's: refused, nothing written.
        assert home.run("sh", "-c", "printf '' > /etc/kael-victim && chmod 644 "
                                    "/etc/kael-victim").returncode == 0
        assert home.as_claude("ln", "-sf", "/etc/kael-victim", str(pointer)).returncode == 0
        code, out = _install(tmp_path, home, item)
        assert code != 0, out[-4000:]
        (line,) = _failures(out)
        assert f"the pointer file {pointer} is a symlink" in line, line
        assert home.run("cat", "/etc/kael-victim").stdout == b""
