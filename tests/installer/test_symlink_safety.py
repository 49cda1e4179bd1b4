"""Root never writes (or reads) through a path the Claude user chose (issue 22, F1): the modules
run as root, the way Ansible runs them, on a Claude user's places with symlinks planted where the
installer writes: they fail with one line naming the path, and nothing appears outside.

The Claude user here is a uid with no name (UID): the directories and symlinks it "planted" are
chowned to it. The playbook side (the roles run these modules as that user) is
tests/appliance/test_installer_symlinks.py, on a real household."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.installer.conftest import FOREIGN_SETTINGS, MARK, RunModule, load_library

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the modules as root")

UID = 4242
HOOK = "/usr/local/bin/kael-hook --container kael-x --config /etc/k/x.toml --state-dir /s"


def _give(*paths: Path) -> None:
    for path in paths:
        os.lchown(path, UID, UID)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def root_only(tmp_path: Path) -> Path:
    """A directory only root may enter (what /etc or /root is to the Claude user)."""
    place = tmp_path / "root-only"
    place.mkdir(mode=0o700)
    return place


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    """The Claude user's home with its config dir and settings, and its state dir."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps(FOREIGN_SETTINGS))
    (home / "state").mkdir(mode=0o700)
    _give(home, home / ".claude", home / ".claude" / "settings.json", home / "state")
    return home


def _merge(run_module: RunModule, settings: Path, backup_dir: Path,
           **extra: Any) -> dict[str, Any]:
    return run_module("claude_settings", {"path": str(settings), "hook_command": HOOK,
                                          "backup_dir": str(backup_dir), **extra})


def _one_line_naming(result: dict[str, Any], path: Path) -> None:
    assert result.get("failed"), result
    assert "\n" not in result["msg"] and str(path) in result["msg"], result["msg"]


def test_root_refuses_the_backup_dir_the_user_pointed_at_a_root_only_dir(
        run_module: RunModule, claude_home: Path, root_only: Path) -> None:
    """The issue's reproduction: <state_dir>/settings-backups -> /etc."""
    backups = claude_home / "state" / "settings-backups"
    backups.symlink_to(root_only)
    _give(backups)
    before = (claude_home / ".claude" / "settings.json").read_bytes()
    result = _merge(run_module, claude_home / ".claude" / "settings.json", backups)
    _one_line_naming(result, claude_home / ".claude" / "settings.json")
    assert _tree(root_only) == []
    assert (claude_home / ".claude" / "settings.json").read_bytes() == before


def test_root_refuses_a_settings_symlink_to_a_missing_file_in_a_root_only_dir(
        run_module: RunModule, claude_home: Path, root_only: Path) -> None:
    settings = claude_home / ".claude" / "settings.json"
    settings.unlink()
    settings.symlink_to(root_only / "settings.json")
    _give(settings)
    result = _merge(run_module, settings, claude_home / "state" / "settings-backups")
    _one_line_naming(result, settings)
    assert _tree(root_only) == []
    assert not (claude_home / "state" / "settings-backups").exists()


def test_root_refuses_a_root_owned_symlink_into_the_users_place(
        run_module: RunModule, claude_home: Path, tmp_path: Path) -> None:
    """A path of root's own that resolves into the Claude user's home is that user's place."""
    link = tmp_path / "settings-link.json"
    link.symlink_to(claude_home / ".claude" / "settings.json")
    result = _merge(run_module, link, tmp_path / "backups")
    _one_line_naming(result, link)
    assert not (tmp_path / "backups").exists()


def test_a_backup_dir_or_record_that_is_a_symlink_is_refused_even_in_roots_place(
        run_module: RunModule, tmp_path: Path, root_only: Path) -> None:
    """The backup dir and the record are ours: never a symlink, whoever runs the module (the
    role runs it as the Claude user, whose permissions would let it write its own target)."""
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(FOREIGN_SETTINGS))
    before = settings.read_bytes()
    backups = tmp_path / "backups"
    backups.symlink_to(root_only)
    result = _merge(run_module, settings, backups)
    _one_line_naming(result, backups)
    assert "symlink" in result["msg"]
    backups.unlink()
    record = tmp_path / "record.json"
    record.symlink_to(root_only / "added.json")
    result = _merge(run_module, settings, backups, record=str(record))
    _one_line_naming(result, record)
    assert _tree(root_only) == [] and settings.read_bytes() == before
    assert not backups.exists()


def test_roots_own_settings_are_still_merged(run_module: RunModule, tmp_path: Path) -> None:
    """A root Claude user's settings (every place root's) are merged as before."""
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(FOREIGN_SETTINGS))
    result = _merge(run_module, settings, tmp_path / "backups")
    assert result["changed"] and not result.get("failed"), result
    assert HOOK in settings.read_text()
    assert sorted(p.name for p in (tmp_path / "backups").iterdir())[-1] \
        == "settings.json.added.json"


def test_root_refuses_to_read_the_users_claude_json(run_module: RunModule, claude_home: Path,
                                                    root_only: Path) -> None:
    """~/.claude.json -> a root-only file that looks like Claude Code's state: root reads
    nothing of it (it would report the registration it holds)."""
    secret = root_only / "state.json"
    secret.write_text(json.dumps({"mcpServers": {"kael-thread-rebuild": {
        "type": "stdio", "command": "root-only-secret", "args": []}}}))
    state = claude_home / ".claude.json"
    state.symlink_to(secret)
    _give(state)
    result = run_module("claude_mcp_server", {"path": str(state)})
    _one_line_naming(result, state)
    assert "root-only-secret" not in json.dumps(result)


def test_the_session_registry_is_read_as_the_claude_user(root_only: Path) -> None:
    """claude_detect (root: it reads /proc) reads the running session from sessions/PID.json as
    the Claude process's uid: a symlink the user planted there to a file only root may read
    gives nothing; the user's own file gives its session."""
    session_id = load_library("claude_detect")._session_id
    secret = root_only / "pid.json"
    secret.write_text('{"sessionId": "root-only"}')
    with tempfile.TemporaryDirectory(prefix="kael-test-DO-NOT-CREATE-") as reachable:
        os.chmod(reachable, 0o711)  # the uid reaches it (pytest's temp dirs are root's alone)
        sessions = Path(reachable) / "config" / "sessions"
        sessions.mkdir(parents=True)
        (sessions / "4711.json").symlink_to(secret)
        (sessions / "4712.json").write_text('{"sessionId": "its-own"}')
        _give(sessions.parent, sessions, sessions / "4711.json", sessions / "4712.json")
        (sessions / "4712.json").chmod(0o600)

        def candidate(pid: int) -> SimpleNamespace:
            proc = SimpleNamespace(pid=pid, uid=UID, gid=UID)
            return SimpleNamespace(config_dir=str(sessions.parent), proc=proc)

        assert session_id(candidate(4711)) is None
        assert session_id(candidate(4712)) == "its-own"


def test_detect_asks_the_users_tmux_socket_as_that_user(tmp_path: Path) -> None:
    """claude_detect asks the tmux server behind the Claude process's socket as that process's
    uid: a socket path the user made a symlink to root's own tmux server gives nothing (as root
    it read root's pane and its start command)."""
    ask_tmux = load_library("claude_detect")._ask_tmux
    socket = f"kael-test-{uuid.uuid4().hex[:8]}-{MARK}"
    start = "sleep 600 # root-only-start-command"
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", MARK, start], check=True)
    try:
        real = subprocess.run(["tmux", "-L", socket, "display-message", "-p",
                               "#{socket_path}\t#{pane_pid}"], capture_output=True, text=True,
                              check=True).stdout.strip().split("\t")
        link = tmp_path / "tmux-socket"
        link.symlink_to(real[0])
        _give(link)
        found = SimpleNamespace(socket=str(link), pane=f"{MARK}:0.0",
                                proc=SimpleNamespace(uid=UID, gid=UID), base=None)
        ask_tmux(found, "tmux", [int(real[1])])
        assert found.base is None and not hasattr(found, "start_command"), vars(found)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)
