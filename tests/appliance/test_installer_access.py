"""The installer's part of issue 9, run by Ansible against a household container whose Claude user
an earlier install had put in the docker group: the kael_claude role installs the wrapper, its
two argv files and the sudoers rule, wires the hook and the MCP server through them, takes the
user out of the docker group (kael_remove_from_docker_group), and the real Claude Code, as that
user, connects to the MCP server (`claude mcp list`); unwiring removes the rule and the files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kael_thread_rebuild.config import Activation, Config
from kael_thread_rebuild.doctor.host import check_claude_access
from kael_thread_rebuild.doctor.host_facts import HOST_FACTS_ENV
from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from kael_thread_rebuild.doctor.model import Check
from kael_thread_rebuild.doctor.runner import run_doctor
from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import (
    PATH,
    UID,
    USER,
    WRAPPER,
    SudoHousehold,
    claude_instance,
    sudo_household,
)
from .test_least_privilege import DENIED

ETC = "/etc/kael-thread-rebuild"
PLAY = [{"hosts": "household", "gather_facts": True, "roles": ["kael.appliance.kael_claude"]}]
#: What the installer's doctor role gathers of the Claude user's access, saved as JSON in ACCESS.
ACCESS_PLAY = [{"hosts": "household", "gather_facts": True, "tasks": [
    {"name": "Gather", "ansible.builtin.include_role": {"name": "kael.appliance.kael_doctor",
                                                       "tasks_from": "claude_access.yml"},
     "vars": {"kael_item": "{{ kael_detect_found[0] }}"}},
    {"name": "Save", "ansible.builtin.copy": {
        "content": "{{ kael_doctor_claude_access | to_json }}", "dest": "{{ access }}",
        "mode": "0644"}}]}]


def _playbook(tmp_path: Path, home: SudoHousehold, item: dict[str, Any], state: str,
              play_text: list[dict[str, Any]] = PLAY,
              **more: Any) -> subprocess.CompletedProcess[str]:
    """PLAY_TEXT run by Ansible as root in the household over Docker's connection, for ITEM (what
    kael_detect found) in STATE, with the extra variables MORE."""
    return home.play(tmp_path, play_text, {
        "access": str(tmp_path / "access.json"),
        "kael_detect_found": [item], "kael_claude_state": state,
        "kael_image_dir": str(engine.IMAGE_DIR), "kael_image": home.appliance.image,
        "kael_remove_from_docker_group": True, "kael_install_sudo": False, **more},
        name=f"vars-{state}")


def _doctor_sees(tmp_path: Path, home: SudoHousehold, item: dict[str, Any],
                 config: Config) -> Check:
    """The installer's doctor role gathers the Claude user's access in the household; doctor's
    claude_access check on those facts, for the instance as the item wires it (its base)."""
    done = _playbook(tmp_path, home, item, "present", ACCESS_PLAY)
    assert done.returncode == 0, done.stdout[-4000:]
    facts = {"claude_access": json.loads((tmp_path / "access.json").read_text())}
    wired = config.model_copy(update={"activation": Activation(item["base"])})
    report = run_doctor(wired, checks=[check_claude_access],
                        environ={HOST_FACTS_ENV: json.dumps(facts)})
    (check,) = report.checks
    return check


def test_the_installer_wires_the_wrapper_and_takes_the_docker_group_away(
        tmp_path: Path, appliance: engine.Instance) -> None:
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    state = config.state_dir
    item = {"name": appliance.name, "base": "tmux", "claude_user": USER, "claude_uid": UID,
            "claude_gid": UID, "claude_home": str(claude.home),
            "claude_account_home": f"/home/{USER}", "claude_config_dir": str(claude.config_dir),
            "claude_config_dir_from_env": True, "claude_cli": ["/usr/local/bin/claude"],
            "state_dir": str(state), "config_path": str(config_path),
            "record_path": f"{ETC}/{appliance.name}.installed.json",
            "container": appliance.daemon_name, "hook_command": None, "mcp_command": None}
    claude_env = {"PATH": PATH, "HOME": str(claude.home),
                  "CLAUDE_CONFIG_DIR": str(claude.config_dir),
                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}

    with sudo_household(tmp_path, appliance, find_claude_binary(),
                        installed=("kael-hook", "lib.sh", "mcp-command.sh")) as home:
        home.join_docker_group()  # what an earlier install did
        assert home.as_claude("docker", "ps").returncode == 0  # root on the host, until now
        before = _doctor_sees(tmp_path, home, item, config)
        assert not before.ok and "is in the docker group" in before.detail, before
        assert "can use the Docker socket unix:///var/run/docker.sock (docker version " \
               "answered" in before.detail and "sudo does not let" in before.detail, before
        assert home.run("install", "-d", "-m", "0755", ETC).returncode == 0  # kael_appliance's

        done = _playbook(tmp_path, home, item, "present")
        assert done.returncode == 0, done.stdout[-4000:]

        assert home.as_claude("id", "-nG").stdout.split() == [USER.encode()]
        denied = home.as_claude("docker", "ps")
        assert denied.returncode != 0 and DENIED in denied.stderr, denied
        settings = json.loads((claude.config_dir / "settings.json").read_text())
        (hook,) = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
        assert hook == (f"/usr/local/bin/kael-hook --instance {appliance.name} --run {WRAPPER} "
                        f"--config {config_path} --state-dir {state}")
        server = json.loads((claude.config_dir / ".claude.json").read_text())["mcpServers"][
            SERVER_NAME]
        assert [server["command"], *server["args"]] == ["sudo", "-n", WRAPPER, "mcp",
                                                        appliance.name]
        rules = home.as_claude("sudo", "-n", "-l").stdout.decode()
        assert f"(root) NOPASSWD: {WRAPPER} mcp {appliance.name}, {WRAPPER} hook " \
               f"{appliance.name}" in rules, rules
        for installed in (WRAPPER, f"{ETC}/{appliance.name}.mcp.argv"):
            assert home.run("cat", installed).stdout.endswith(b"\n"), installed
        assert home.run("cmp", WRAPPER, "-", stdin=(engine.IMAGE_DIR / "kael-run").read_bytes()
                        ).returncode == 0
        after = _doctor_sees(tmp_path, home, item, config)
        assert after.ok and after.detail.startswith(
            f"the Claude user {USER} is in no docker group, cannot use "
            "unix:///var/run/docker.sock (permission denied"), after
        # The real Claude Code, as the Claude user, starts the server through the wrapper.
        listed = home.as_claude("claude", "mcp", "list", env=claude_env, workdir=claude.cwd)
        line = next(line for line in listed.stdout.decode().splitlines()
                    if line.startswith(f"{SERVER_NAME}:"))
        assert "Connected" in line and "Failed" not in line, listed

        # Uninstall works from the install record, as kael_detect reads it.
        record = json.loads(home.run("cat", item["record_path"]).stdout)
        assert record["mcp_command"] == ["sudo", "-n", WRAPPER, "mcp", appliance.name]
        done = _playbook(tmp_path, home, record, "absent")
        assert done.returncode == 0, done.stdout[-4000:]
        sudoers = f"/etc/sudoers.d/kael-thread-rebuild-{appliance.name}"
        for path in (sudoers, f"{ETC}/{appliance.name}.mcp.argv",
                     f"{ETC}/{appliance.name}.hook.argv"):
            assert home.run("test", "-e", path).returncode == 1, path
        assert SERVER_NAME not in json.loads(
            (claude.config_dir / ".claude.json").read_text()).get("mcpServers", {})
        assert home.as_claude("sudo", "-n", WRAPPER, "mcp", appliance.name).returncode == 1


def test_the_installer_allows_a_pointer_instances_runner_and_doctor_asks_for_it(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """A pointer instance's runner reaches the appliance through the wrapper too (`wait` after
    each Stop, `start-failed`): the installer allows those lines, the doctor role asks sudo for
    them, and claude_access fails without them and passes with them."""
    claude, config, config_path = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    item = {"name": appliance.name, "base": "pointer", "claude_user": USER, "claude_uid": UID,
            "claude_gid": UID, "claude_home": str(claude.home),
            "claude_account_home": f"/home/{USER}", "claude_config_dir": str(claude.config_dir),
            "claude_config_dir_from_env": True, "claude_cli": ["/usr/local/bin/claude"],
            "state_dir": str(config.state_dir), "config_path": str(config_path),
            "record_path": f"{ETC}/{appliance.name}.installed.json",
            "container": appliance.daemon_name, "hook_command": None, "mcp_command": None}
    with sudo_household(tmp_path, appliance, find_claude_binary(),
                        installed=("kael-hook", "lib.sh", "mcp-command.sh")) as home:
        before = _doctor_sees(tmp_path, home, item, config)
        assert not before.ok and f"`{WRAPPER} wait {appliance.name}` and `{WRAPPER} start-failed " \
            f"{appliance.name}`, so its pointer runner" in before.detail, before
        assert home.run("install", "-d", "-m", "0755", ETC).returncode == 0  # kael_appliance's
        done = _playbook(tmp_path, home, item, "present")
        assert done.returncode == 0, done.stdout[-4000:]
        rules = home.as_claude("sudo", "-n", "-l").stdout.decode()
        assert f"{WRAPPER} wait {appliance.name}, {WRAPPER} start-failed {appliance.name}" \
            in rules, rules
        after = _doctor_sees(tmp_path, home, item, config)
        assert after.ok and after.detail.endswith(
            f"sudo lets it run {WRAPPER} mcp|hook|wait|start-failed {appliance.name}"), after
