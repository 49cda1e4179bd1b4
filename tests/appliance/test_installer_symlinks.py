"""Issue 22, F1, through the installer's roles over a real connection: the household is a
container whose Claude user (`household`, uid 1000) is not root; Ansible connects as root and
runs the roles of playbooks/install.yml after detection (kael_appliance, kael_claude) with what
kael_detect would have found (detection needs a live Claude Code, which this household does not
run). The Claude user plants symlinks where the installer writes (its state dir's
settings-backups -> /etc, its settings.json -> a missing file in /root, a state dir in its home
-> a directory of root's); the next run fails the host with one line naming the path, and
nothing appears or changes outside the user's places.

F2 there too: the daemon's role binds its mounts (never `-v`, which has root's dockerd create a
missing source through the user's links) and refuses a source that is missing, a symlink or
passes through one, or is someone else's, before the daemon starts."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import UID, USER, SudoHousehold, claude_instance, sudo_household
from .test_installer_access import ETC, _playbook

PLAY = [{"hosts": "household", "gather_facts": True, "gather_subset": ["min"],
         "roles": ["kael.appliance.kael_appliance", "kael.appliance.kael_claude"]}]
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


def _daemon(name: str) -> dict[str, Any] | None:
    """The daemon container's `docker inspect`, or None when there is none."""
    done = subprocess.run(["docker", "inspect", name], capture_output=True, text=True,
                          timeout=60, check=False)
    return json.loads(done.stdout)[0] if done.returncode == 0 else None


#: The installer's doctor role puts its one-off container together (after finding the daemon),
#: saved as JSON in ARGV.
DOCTOR_ARGV_PLAY = [{"hosts": "household", "gather_facts": True, "tasks": [
    {"name": "Find the daemon", "community.docker.docker_container_info": {
        "name": "{{ kael_detect_found[0].container }}"}, "register": "kael_doctor_daemon"},
    {"name": "Gather", "ansible.builtin.include_role": {"name": "kael.appliance.kael_doctor",
                                                       "tasks_from": "host_facts.yml"},
     "vars": {"kael_item": "{{ kael_detect_found[0] }}"}},
    {"name": "Save", "ansible.builtin.copy": {
        "content": "{{ kael_doctor_argv | to_json }}", "dest": "{{ argv }}", "mode": "0644"}}]}]


def _doctor_container_has_the_limits_and_binds(tmp_path: Path, home: SudoHousehold,
                                               item: dict[str, Any]) -> None:
    """Item 2: the doctor's container binds the daemon's mounts (`--mount`, never `--volume`)
    with the daemon's memory and CPU limits, and Docker runs it (the doctor answers JSON)."""
    saved = tmp_path / "doctor-argv.json"
    done = _playbook(tmp_path, home, item, "present", DOCTOR_ARGV_PLAY, argv=str(saved))
    assert done.returncode == 0, done.stdout[-4000:]
    argv = json.loads(saved.read_text())
    assert {"--memory=2g", "--memory-swap=2g", "--cpus=1.0"} <= set(argv), argv
    assert not [arg for arg in argv if arg.startswith(("--volume", "-v"))], argv
    assert f"--mount=type=bind,source={item['config_path']},target={item['config_path']}," \
           "readonly" in argv, argv
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert ran.stdout.startswith("{"), (ran.returncode, ran.stdout[-2000:], ran.stderr[-2000:])


def test_the_installers_daemon_binds_its_mounts_and_refuses_a_symlink(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """The installer runs the daemon (kael_appliance, over Docker's connection, as root) with
    bind mounts and its limits. The Claude user then makes its `projects` dir a symlink to a
    directory of root's (the issue's `~/.claude/projects` -> `/etc/cron.d`), so the project dir
    the daemon mounts is missing behind a symlink; with the daemon gone (removed, as before a
    re-create), the next install fails the host with one line naming the project dir, starts no
    daemon, and creates nothing in root's directory (`-v` made a root-owned directory there)."""
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    item = _item(appliance.name, claude, config_path, config.state_dir)
    item["config"] = tomllib.loads(config_path.read_text())  # the pointer base, all in tmp_path
    item["container"] = f"{appliance.daemon_name}-installed"
    victim = tmp_path / "root-only"
    victim.mkdir(mode=0o755)
    projects = config.project_dir.parent
    play = [{"hosts": "household", "gather_facts": True, "gather_subset": ["min"],
             "roles": ["kael.appliance.kael_appliance"]}]
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        done = _playbook(tmp_path, home, item, "present", play)
        assert done.returncode == 0, done.stdout[-4000:]
        daemon = _daemon(item["container"])
        assert daemon is not None
        host = daemon["HostConfig"]
        assert host["NanoCpus"] == 1_000_000_000, host["NanoCpus"]
        assert host["Memory"] == host["MemorySwap"] == 2 * 1024**3, host["Memory"]
        assert not host["Binds"], host["Binds"]
        binds = {m["Source"]: m.get("ReadOnly", False) for m in host["Mounts"]
                 if m["Type"] == "bind"}
        assert binds[str(config.project_dir)] is False and binds[str(config_path)] is True, binds
        _doctor_container_has_the_limits_and_binds(tmp_path, home, item)

        subprocess.run(["docker", "rm", "-f", item["container"]], capture_output=True,
                       timeout=60, check=True)
        for argv in (["mv", str(projects), f"{projects}.old"],
                     ["ln", "-s", str(victim), str(projects)]):
            assert home.as_claude(*argv).returncode == 0, argv
        done = _playbook(tmp_path, home, item, "present", play)
        out = done.stdout + done.stderr
        assert done.returncode != 0, out[-4000:]
        (line,) = _failures(out)
        assert line.startswith(f"{appliance.name}: {config.project_dir} does not exist"), line
        assert "\n" not in line, line
        assert list(victim.iterdir()) == [], list(victim.iterdir())
        assert _daemon(item["container"]) is None

        # The project dir there, root's, behind the user's symlink: refused, not mounted.
        (victim / config.project_dir.name).mkdir(mode=0o755)
        done = _playbook(tmp_path, home, item, "present", play)
        out = done.stdout + done.stderr
        (line,) = _failures(out)
        assert line.startswith(
            f"{appliance.name}: {config.project_dir} is not its real path "
            f"({victim / config.project_dir.name}): a symlink in a mount is refused"), line
        assert _daemon(item["container"]) is None


def test_purging_a_state_dir_in_roots_directory_removes_it(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """The state dir in a directory that is root's alone: root removes it on a purge, and only
    with kael_purge_state."""
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    item = _item(appliance.name, claude, config_path, config.state_dir)
    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        code, out = _install(tmp_path, home, item)
        assert code == 0, out[-4000:]
        for purge in (False, True):
            done = _playbook(tmp_path, home, item, "absent", PLAY, kael_appliance_enabled=False,
                             kael_appliance_state="absent", kael_purge_state=purge)
            assert done.returncode == 0, done.stdout[-4000:]
            assert config.state_dir.exists() is not purge
