"""Issue 22, F1, through the installer's roles over a real connection: the household is a
container whose Claude user (`household`, uid 1000) is not root; Ansible connects as root and
runs the roles of playbooks/install.yml after detection (kael_appliance, kael_claude) with what
kael_detect would have found (detection needs a live Claude Code, which this household does not
run). The Claude user plants symlinks where the installer writes (its state dir's
settings-backups -> /etc, its settings.json -> a missing file in /root, a state dir in its home
-> a directory of root's); the next run fails the host with one line naming the path, and
nothing appears or changes outside the user's places."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import UID, USER, SudoHousehold, claude_instance, sudo_household
from .test_installer_access import ETC, _playbook

PLAY = [{"hosts": "household", "gather_facts": True, "gather_subset": ["min"],
         "roles": ["kael_appliance", "kael_claude"]}]
MARKER = "/tmp/kael-test-marker"
#: What a failed task says: `fatal: [host]: FAILED! => {json}` (or `failed: … (item=…) => …`).
FAILED_PREFIXES = ("fatal: [", "failed: [")


def _install(tmp_path: Path, home: SudoHousehold, item: dict[str, Any]) -> tuple[int, str]:
    done = _playbook(tmp_path, home, item, "present", PLAY, kael_appliance_enabled=False)
    return done.returncode, done.stdout + done.stderr


def _refused(tmp_path: Path, home: SudoHousehold, item: dict[str, Any],
             *planted: list[str]) -> str:
    """The Claude user runs PLANTED; the next install fails the host: its one failure line."""
    for argv in planted:
        done = home.as_claude(*argv)
        assert done.returncode == 0, done
    code, out = _install(tmp_path, home, item)
    assert code != 0, out[-4000:]
    (line,) = _failures(out)
    assert "\n" not in line, line
    assert _new_outside(home, MARKER) == [], out[-4000:]
    return line


def _failures(out: str) -> list[str]:
    """The message of each failed task of the run."""
    return [json.loads(line.partition(" => ")[2])["msg"] for line in out.splitlines()
            if line.startswith(FAILED_PREFIXES)]


def _item(name: str, claude: Any, config_path: Path, state: Path) -> dict[str, Any]:
    return {"name": name, "base": "tmux", "claude_user": USER, "claude_uid": UID,
            "claude_gid": UID, "claude_home": str(claude.home),
            "claude_account_home": f"/home/{USER}", "claude_config_dir": str(claude.config_dir),
            "claude_config_dir_from_env": True, "claude_cli": ["/usr/local/bin/claude"],
            "state_dir": str(state), "config_path": str(config_path),
            "record_path": f"{ETC}/{name}.installed.json", "container": f"kael-{name}",
            "hook_command": None, "mcp_command": ["/bin/true"],
            "config": {"instance": name, "state_dir": str(state),
                       "claude_config_dir": str(claude.config_dir), "activation": "tmux"}}


def _new_outside(home: SudoHousehold, marker: str) -> list[str]:
    """Files and directories under /etc and /root changed since MARKER (Ansible's own temp
    files aside)."""
    found = home.run("find", "/etc", "/root", "-newer", marker, "-not", "-path", "/root/.ansible*",
                     "-not", "-path", "/root")
    return found.stdout.decode().split()


def test_root_writes_nothing_through_the_claude_users_symlinks(
        tmp_path: Path, appliance: engine.Instance) -> None:
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    state = config.state_dir
    settings = claude.config_dir / "settings.json"
    backups = state / "settings-backups"
    item = _item(appliance.name, claude, config_path, state)
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        code, out = _install(tmp_path, home, item)
        assert code == 0, out[-4000:]
        assert (backups / "settings.json.added.json").stat().st_uid == UID
        assert home.run("touch", MARKER).returncode == 0

        # The user edits its settings (the install's hook goes) and points the backups at /etc.
        data = json.loads(settings.read_text())
        del data["hooks"]
        edited = tmp_path / "edited.json"
        edited.write_text(json.dumps(data))
        edited.chmod(0o644)
        line = _refused(tmp_path, home, item, ["cp", str(edited), str(settings)],
                        ["rm", "-r", str(backups)], ["ln", "-s", "/etc", str(backups)])
        assert f"{backups} is a symlink" in line, line

        # Both symlinks of the issue: settings.json -> a missing file in /root too.
        line = _refused(tmp_path, home, item, ["ln", "-sf", "/root/settings.json", str(settings)])
        assert f"{backups} is a symlink" in line, line

        # The backups back, settings.json alone -> /root: read as the user, refused.
        line = _refused(tmp_path, home, item, ["rm", str(backups)])
        assert str(settings) in line and "/root/settings.json" in line, line
        assert "Permission denied" in line, line
        assert home.run("test", "-e", "/root/settings.json").returncode == 1


def test_a_state_dir_the_claude_user_made_a_symlink_fails_the_host(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """A state dir in the Claude user's home, replaced by a symlink to a directory of root's:
    the install fails naming it, and that directory keeps its owner and mode."""
    claude, _, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    state = claude.home / "kael-state"
    item = _item(appliance.name, claude, config_path, state)
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        code, out = _install(tmp_path, home, item)  # the user's own dir: created as the user
        assert code == 0, out[-4000:]
        assert state.is_dir() and state.stat().st_uid == UID
        assert state.stat().st_mode & 0o777 == 0o700
        assert home.run("install", "-d", "-m", "0755", "/etc/kael-victim").returncode == 0
        assert home.run("touch", MARKER).returncode == 0
        line = _refused(tmp_path, home, item, ["rm", "-r", str(state)],
                        ["ln", "-s", "/etc/kael-victim", str(state)])
        assert f"the state dir {state} is a symlink" in line, line
        victim = home.run("stat", "-c", "%u %a", "/etc/kael-victim").stdout.decode().split()
        assert victim == ["0", "755"], victim
        assert home.run("find", "/etc/kael-victim", "-mindepth", "1").stdout == b""


def test_purging_a_state_dir_never_deletes_through_the_users_links(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """Uninstall with kael_purge_state, the state dir in the Claude user's home: the user made
    the directory it is in a symlink to a directory of root's holding one of the same name; the
    purge runs as the user, who may not delete it, so root's directory stays whole."""
    claude, _, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    state = claude.home / "kael" / "state"
    item = _item(appliance.name, claude, config_path, state)
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        code, out = _install(tmp_path, home, item)
        assert code == 0, out[-4000:]
        assert state.is_dir() and state.stat().st_uid == UID
        victim = "/etc/kael-victim/state"
        assert home.run("install", "-d", "-m", "0755", victim).returncode == 0
        assert home.run("touch", f"{victim}/keep").returncode == 0
        for argv in (["mv", str(state.parent), f"{state.parent}.old"],
                     ["ln", "-s", "/etc/kael-victim", str(state.parent)]):
            assert home.as_claude(*argv).returncode == 0, argv
        done = _playbook(tmp_path, home, item, "absent", PLAY, kael_appliance_enabled=False,
                         kael_appliance_state="absent", kael_purge_state=True)
        assert home.run("test", "-f", f"{victim}/keep").returncode == 0, done.stdout[-4000:]
