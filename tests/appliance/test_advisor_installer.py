"""Issue 24, item 1: the kael_advisor role over a real connection. The household is a container
whose Claude user (`household`, uid 1000) is not root and already has its own hooks, rules, env,
CLAUDE.md text, a /review command and Kimi keys; Ansible connects as root over Docker's
connection and runs the role with the provider's key from an Ansible Vault file. Check mode with
--diff on the fresh household changes nothing; the install wires everything (as the user, the key
never printed); a second run changes nothing; the uninstall gives every file of the user's back
byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import UID, USER, SudoHousehold, claude_instance, sudo_household

REPO = engine.REPO
VENV_BIN = REPO / ".venv" / "bin"
ETC = "/etc/kael-thread-rebuild"
LIBEXEC = "/usr/local/lib/kael-thread-rebuild"
SECRET = "sk-kael-vault-DO-NOT-CREATE-5f1c0a"
PLAY = [{"hosts": "household", "gather_facts": True, "gather_subset": ["min"],
         "roles": ["kael.appliance.kael_advisor"]}]
ASK = ["advisor_consult", "advisor_create_task", "advisor_close_task"]
ALLOW = ["advisor_poll", "advisor_list_tasks"]
USERS_SETTINGS = (
    '{\n  "model": "opus",\n  "hooks": {\n    "UserPromptSubmit": [\n'
    '      {"hooks": [{"type": "command", "command": "my-prompt-logger", "timeout": 3}]}\n'
    '    ],\n    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]\n'
    '  },\n  "permissions": {"allow": ["Bash(ls:*)"], "ask": ["Bash(rm:*)"]},\n'
    '  "env": {"MY_VAR": "caf\\u00e9", "MCP_TOOL_TIMEOUT": "90000"}\n}\n')
USERS_CLAUDE_MD = "# My rules\n\nAlways answer in English.\nNo newline at the end"
USERS_REVIEW = "My own /review: read the diff twice.\n"
USERS_KIMI = 'theme = "dark"\n\n[providers.mine]\ntype = "kimi"\napi_key = "users-own"\n'


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _vault(tmp_path: Path) -> tuple[Path, Path]:
    """An Ansible Vault file holding vault_kimi_key, and its password file."""
    password = tmp_path / "vault-password"
    password.write_text("kael-test-vault\n")
    plain = tmp_path / "vault.yml"
    plain.write_text(yaml.safe_dump({"vault_kimi_key": SECRET}))
    subprocess.run([str(VENV_BIN / "ansible-vault"), "encrypt", "--vault-password-file",
                    str(password), str(plain)], check=True, capture_output=True)
    assert SECRET not in plain.read_text()
    return plain, password


def _play(tmp_path: Path, home: SudoHousehold, variables: dict[str, Any], *options: str,
          ) -> subprocess.CompletedProcess[str]:
    """The kael_advisor role run by Ansible as root in the household over Docker's connection."""
    vault, password = _vault(tmp_path)
    # kael_config as the admin gives it on the command line (-e, above every role's variable):
    # the role's own names must not meet it.
    return home.play(tmp_path, PLAY, {"kael_image_dir": str(engine.IMAGE_DIR),
                                      "kael_install_sudo": False,
                                      "kael_config": {"dirty_budget_bytes": 2097152},
                                      **variables},
                     "-e", f"@{vault}", "--vault-password-file", str(password), *options)


def _recap(out: str) -> dict[str, int]:
    found = re.search(r"^\S+\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)",
                      out, re.MULTILINE)
    assert found, out[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, found.groups()),
                    strict=True))


def _changed_tasks(out: str) -> list[str]:
    """The tasks that reported a change, for a failure's message."""
    task, found = "", []
    for line in out.splitlines():
        if line.startswith("TASK ["):
            task = line
        elif line.startswith("changed: ["):
            found.append(task)
    return found


def test_the_advisor_role_installs_idempotently_and_uninstalls_byte_for_byte(
        tmp_path: Path, appliance: engine.Instance) -> None:
    claude, _, _ = claude_instance(tmp_path, appliance.name, "http://127.0.0.1:9")
    config = claude.config_dir
    settings, claude_md = config / "settings.json", config / "CLAUDE.md"
    review = config / "commands" / "review.md"
    kimi = tmp_path / "kimi"
    settings.write_text(USERS_SETTINGS)
    claude_md.write_text(USERS_CLAUDE_MD)
    review.parent.mkdir()
    review.write_text(USERS_REVIEW)
    kimi.mkdir(mode=0o700)
    (kimi / "config.toml").write_text(USERS_KIMI)
    # Claude Code rewrites its state file itself: what must come back there is the user's
    # own MCP servers, not its bytes.
    state_file = config / ".claude.json"
    state = json.loads(state_file.read_text())
    state["mcpServers"] = {"mine": {"type": "stdio", "command": "my-mcp", "args": [], "env": {}}}
    state_file.write_text(json.dumps(state, indent=2))
    for path in (settings, claude_md, review.parent, review, kimi, kimi / "config.toml"):
        os.chown(path, UID, UID)
    users_files = [settings, claude_md, review, kimi / "config.toml"]
    before = {path: _sha(path) for path in users_files}
    entry = {"user": USER, "claude_config_dir": str(config),
             "claude_cli": ["/usr/local/bin/claude"], "kimi_home": str(kimi),
             "roots": [str(tmp_path)],
             "provider": {"base_url": "http://127.0.0.1:9/v1", "model": "kimi-for-coding",
                          "api_key": "{{ vault_kimi_key }}"}}
    present = {"kael_advisor": [entry]}
    argv_file, sudoers = f"{ETC}/{USER}.advisor.argv", f"/etc/sudoers.d/kael-advisor-{USER}"

    with sudo_household(tmp_path, appliance, find_claude_binary(), installed=()) as home:
        # Check mode with --diff on the fresh household: it says what it would do, writes nothing.
        checked = _play(tmp_path, home, present, "--check", "--diff")
        assert checked.returncode == 0, checked.stdout[-4000:]
        assert "check mode: a real run creates" in checked.stdout
        assert re.search(r'^\+\s+"command": "python3 -I ', checked.stdout, re.MULTILINE), \
            checked.stdout[-6000:]  # the settings' diff
        assert SECRET not in checked.stdout + checked.stderr
        assert {path: _sha(path) for path in users_files} == before
        assert home.run("test", "-e", argv_file).returncode == 1
        assert not (config / "kael-advisor-sessions").exists()

        installed = _play(tmp_path, home, present, "-v")
        assert installed.returncode == 0, installed.stdout[-6000:]
        assert _recap(installed.stdout)["changed"] > 0
        assert SECRET not in installed.stdout + installed.stderr

        # The wrapper's advisor role: the fixed part (the image last, no project), roots, rule.
        argv = home.run("cat", argv_file).stdout.decode().splitlines()
        assert argv[:4] == ["docker", "run", "-i", "--rm"] and argv[-1] == "kael-advisor:latest"
        assert f"{UID}:{UID}" in argv and "-w" not in argv
        assert f"KIMI_CODE_HOME={kimi}" in argv
        for path, mode in ((argv_file, "0 644"), (f"{ETC}/{USER}.advisor.roots", "0 644"),
                           (sudoers, "0 440"), (f"{LIBEXEC}/kael-advisor-hook.pyz", "0 755")):
            assert home.run("stat", "-c", "%u %a", path).stdout.decode().split() == \
                mode.split(), path
        assert home.run("cat", f"{ETC}/{USER}.advisor.roots").stdout.decode() == f"{tmp_path}\n"
        rule = home.run("cat", sudoers).stdout.decode()
        assert f"#{UID} ALL=(root) NOPASSWD: {LIBEXEC}/kael-run advisor {USER}\n" in rule
        assert home.run("sudo", "-l", "-U", USER).stdout.decode().count("NOPASSWD") == 1

        # Claude Code's side, every file the user's (written as the user).
        state = json.loads(state_file.read_text())
        assert state["mcpServers"]["mine"]["command"] == "my-mcp"
        assert state["mcpServers"]["advisor-mcp"]["command"] == "sudo"
        assert state["mcpServers"]["advisor-mcp"]["args"] == [
            "-n", f"{LIBEXEC}/kael-run", "advisor", USER]
        data = json.loads(settings.read_text())
        assert [f"mcp__advisor-mcp__{t}" for t in ALLOW if f"mcp__advisor-mcp__{t}"
                in data["permissions"]["allow"]] == [f"mcp__advisor-mcp__{t}" for t in ALLOW]
        assert sorted(data["permissions"]["ask"]) == sorted(
            ["Bash(rm:*)", *(f"mcp__advisor-mcp__{t}" for t in ASK)])
        prompt = data["hooks"]["UserPromptSubmit"]
        assert prompt[0]["hooks"][0]["command"] == "my-prompt-logger"
        assert prompt[1]["hooks"][0]["command"] == \
            f"python3 -I {LIBEXEC}/kael-advisor-hook.pyz"
        assert data["env"] == {"MY_VAR": "café", "MCP_TOOL_TIMEOUT": "90000"}  # the user's value
        assert USERS_SETTINGS.splitlines()[1] in settings.read_text()
        text = claude_md.read_text()
        assert text.endswith(USERS_CLAUDE_MD) and text.startswith("<!-- kael-advisor: begin")
        assert review.read_text() == USERS_REVIEW
        for name in ("advisor.md", "blueprint.md"):
            assert (config / "commands" / name).stat().st_uid == UID, name
        toml = tomllib.loads((kimi / "config.toml").read_text())
        assert toml["default_model"] == "kael-advisor" and toml["telemetry"] is False
        assert toml["providers"]["kael-advisor"]["api_key"] == SECRET
        assert toml["providers"]["mine"]["api_key"] == "users-own" and toml["theme"] == "dark"
        assert toml["model_catalog"]["refresh_on_start"] is False
        info = (kimi / "config.toml").stat()
        assert (info.st_uid, info.st_mode & 0o777) == (UID, 0o600)
        agent = kimi / "agents" / "kael-advisor.md"
        assert agent.stat().st_uid == UID and agent.stat().st_mode & 0o777 == 0o444
        assert "tools: Read, Glob, Grep" in agent.read_text()
        sessions = config / "kael-advisor-sessions"
        assert sessions.stat().st_uid == UID and sessions.stat().st_mode & 0o777 == 0o700

        again = _play(tmp_path, home, present)
        assert again.returncode == 0, again.stdout[-4000:]
        assert _recap(again.stdout)["changed"] == 0, _changed_tasks(again.stdout)

        # A Claude Code that still runs keeps the advisor's server it started; another user's
        # server is not this uninstall's.
        servers_of = {}
        for uid in (UID, UID + 1):
            started = home.run("docker", "run", "-d", "--label",
                               "io.kael-thread-rebuild.role=advisor-mcp", "--user",
                               f"{uid}:{uid}", "--entrypoint", "sleep", "kael-advisor:latest",
                               "600")
            assert started.returncode == 0, started.stderr
            servers_of[uid] = started.stdout.decode().strip()

        removed = _play(tmp_path, home, {"kael_advisor": [], "kael_advisor_state": "absent"},
                        "--diff")
        assert removed.returncode == 0, removed.stdout[-6000:]
        assert SECRET not in removed.stdout + removed.stderr
        left = home.run("docker", "ps", "-a", "-q", "--no-trunc", "--filter",
                        "label=io.kael-thread-rebuild.role=advisor-mcp").stdout.decode().split()
        home.run("docker", "rm", "-f", *servers_of.values())
        assert servers_of[UID] not in left and servers_of[UID + 1] in left, left
        after = {path: _sha(path) for path in users_files}
        assert after == before, removed.stdout[-6000:]
        servers = json.loads(state_file.read_text())["mcpServers"]
        assert servers == {"mine": {"type": "stdio", "command": "my-mcp", "args": [], "env": {}}}
        assert sorted(p.name for p in (config / "commands").iterdir()) == ["review.md"]
        assert not sessions.exists() and not agent.exists()
        for path in (argv_file, sudoers, f"{ETC}/{USER}.advisor.json",
                     f"{ETC}/{USER}.advisor.roots", f"{LIBEXEC}/kael-advisor-hook.pyz"):
            assert home.run("test", "-e", path).returncode == 1, path
