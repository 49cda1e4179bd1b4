"""`claude-pieces` prints what the installer writes: the real `claude_settings` module on an
empty settings file gives the same block, and the printed `claude mcp add`, run with the real
pinned Claude Code in its own config dir, registers the MCP server the command names."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.conftest import REPO
from tests.installer.conftest import REAL_CLAUDE, RunModule

ENGINE = Path(sys.executable).parent / "kael-thread-rebuild"
APPLIANCE_HOOK = ("/usr/local/bin/kael-hook --container kael-thread-rebuild-docs --config "
                  "/etc/kael-thread-rebuild/docs.toml --state-dir /var/lib/kael/docs")


def pieces(config: Path, *extra: str, as_json: bool = True) -> Any:
    args = [str(ENGINE), "--config", str(config), *(["--json"] if as_json else []),
            "claude-pieces", *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if as_json else proc.stdout


@pytest.mark.parametrize("hook", [None, APPLIANCE_HOOK], ids=["engine", "appliance"])
def test_the_settings_block_is_what_the_installer_writes(
        run_module: RunModule, instance_config: Path, tmp_path: Path, hook: str | None) -> None:
    extra = ["--hook-command", hook] if hook else []
    printed = pieces(instance_config, *extra)
    settings = tmp_path / "settings.json"
    settings.write_text("")
    result = run_module("claude_settings", {
        "path": str(settings), "hook_command": printed["hook_command"],
        "backup_dir": str(tmp_path / "backups")})
    assert result["changed"] and not result.get("failed"), result
    assert json.loads(settings.read_text()) == printed["settings"]
    text = pieces(instance_config, *extra, as_json=False)
    assert settings.read_text() in text  # the block as printed, byte for byte
    if hook is None:
        assert printed["hook_command"] == shlex.join(
            ["kael-thread-rebuild", "--config", str(instance_config), "hook-stop"])
    allowed = printed["settings"]["permissions"]["allow"]
    assert not set(printed["asking_tools"]) & set(allowed)


def test_a_pointer_base_gets_no_hook(run_module: RunModule, instance_config: Path,
                                     tmp_path: Path) -> None:
    pointer = tmp_path / "pointer.toml"
    pointer.write_text(instance_config.read_text() + 'activation = "pointer"\n'
                       f'resume_pointer_path = "{tmp_path / "resume-pointer"}"\n')
    printed = pieces(pointer)
    assert printed["hook_command"] is None and "hooks" not in printed["settings"]
    settings = tmp_path / "settings.json"
    run_module("claude_settings", {"path": str(settings), "backup_dir": str(tmp_path / "b")})
    assert json.loads(settings.read_text()) == printed["settings"]


def test_the_printed_mcp_add_registers_the_server(run_module: RunModule, instance_config: Path,
                                                   tmp_path: Path) -> None:
    config_dir, home = tmp_path / "claude-config", tmp_path / "home"
    config_dir.mkdir()
    home.mkdir()
    printed = pieces(instance_config, "--claude", str(REAL_CLAUDE))
    argv = shlex.split(printed["mcp_add_command"])
    assert argv == printed["mcp_add"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "CLAUDE_CONFIG_DIR": str(config_dir), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                          check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = json.loads((config_dir / ".claude.json").read_text())
    server = state["mcpServers"]["kael-thread-rebuild"]
    assert [server["command"], *server["args"]] == [
        "kael-thread-rebuild-mcp", "--config", str(instance_config)]
    # The installer reads the registration back with its own module and finds the command.
    found = run_module("claude_mcp_server", {"path": str(config_dir / ".claude.json")})
    assert found["argv"] == printed["mcp_add"][printed["mcp_add"].index("--") + 1:]


def test_the_example_in_the_doc_is_what_the_command_prints(instance_config: Path) -> None:
    page = (REPO / "docs" / "by-hand.md").read_text(encoding="utf-8")
    shown = page.split("```text\n", 1)[1].split("```", 1)[0]
    printed = pieces(instance_config, as_json=False)
    claude_dir = str(instance_config.parent / "claude")
    expected = printed.replace(str(instance_config), "/etc/kael-thread-rebuild/companion.toml")
    assert shown == expected.replace(claude_dir, "/home/me/.claude")


def test_the_role_registers_and_times_the_hook_as_printed(instance_config: Path) -> None:
    """The role's own defaults and its `claude mcp add` task give what claude-pieces prints."""
    defaults = yaml.safe_load((REPO / "roles/kael/defaults/main.yml").read_text())
    printed = pieces(instance_config)
    entry = printed["settings"]["hooks"]["Stop"][0]["hooks"][0]
    assert defaults["kael_hook_timeout"] == entry["timeout"]
    assert defaults["kael_server_name"] == printed["mcp_add"][printed["mcp_add"].index("--") - 1]
    tasks = yaml.safe_load((REPO / "roles/kael_claude/tasks/mcp_present.yml").read_text())
    argv = next(t["ansible.builtin.command"]["argv"] for t in tasks
                if "Register the MCP server" in t["name"])
    words = printed["mcp_add"][1:printed["mcp_add"].index("--") + 1]
    assert argv == ("{{ kael_item.claude_cli + " + repr(words).replace(
        f"'{defaults['kael_server_name']}'", "kael_server_name") + " + kael_claude_mcp }}")
