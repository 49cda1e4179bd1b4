"""Doctor's mcp_loaded: the live Claude Code runs this instance's MCP server. Claude Code 2.1.328
starts each stdio MCP server as its own child when it starts, and never one registered while it
runs; the check warns (never fails) until that Claude Code restarts. Measured on the real binary
in a private tmux, and on real processes for the command-line match."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from kael_thread_rebuild.doctor.mcp_live import McpCommand, check_mcp_loaded
from kael_thread_rebuild.doctor.model import Check
from kael_thread_rebuild.doctor.reading import read_cmdline
from kael_thread_rebuild.doctor.runner import run_doctor
from tests.conftest import ConfigFactory
from tests.support.claude_env import (
    ClaudeEnv,
    TmuxClaude,
    claude_available,
    find_claude_binary,
    make_claude_env,
)
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import wait_until

COMPANION = Path(__file__).parent / "support" / "companion_mcp.py"
#: A real stdio MCP server (the companion stand-in), run as Claude Code runs any.
COMPANION_SERVER = {"type": "stdio", "command": sys.executable, "args": [str(COMPANION)],
                    "env": {}}


def loaded(config: Config) -> Check:
    return run_doctor(config, checks=[check_mcp_loaded]).checks[0]


def claude_children(tui: TmuxClaude) -> list[list[str]]:
    """The command lines of the processes under the pane's Claude Code."""
    pane = int(tui._tmux("display-message", "-p", "-t", tui.target, "#{pane_pid}").stdout)
    return [argv for pid in registry.process_tree(pane)[1:]
            if (argv := read_cmdline(pid)) is not None]


def doctor_config(make_config: ConfigFactory, env: ClaudeEnv, tui: TmuxClaude) -> Config:
    env.project_dir.mkdir(parents=True, exist_ok=True)
    return make_config(project_dir=str(env.project_dir), claude_workdir=str(env.cwd),
                       claude_config_dir=str(env.config_dir), tmux_socket=tui.socket,
                       tmux_target=tui.target)


@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available() or shutil.which("tmux") is None,
                    reason="the Claude Code binary or tmux is not installed")
def test_a_server_registered_while_claude_code_runs_warns_until_it_restarts(
        tmp_path: Path, make_config: ConfigFactory) -> None:
    with StandinAPI() as api:
        env = make_claude_env(tmp_path / "claude", api.url,
                              mcp_servers={"companion": COMPANION_SERVER})
        with TmuxClaude(env) as tui:
            tui.wait_for("❯", timeout=60)
            config = doctor_config(make_config, env, tui)
            # What the check relies on: the registered server runs as the live process's child,
            # with the registered command line and nothing around it.
            wait_until(lambda: [sys.executable, str(COMPANION)] in claude_children(tui),
                       timeout=30, what="Claude Code to start its companion MCP server")
            assert loaded(config).skipped  # ours is not registered yet
            # Registered as the installer does, while this Claude Code runs.
            subprocess.run([str(find_claude_binary()), "mcp", "add", "--scope", "user",
                            SERVER_NAME, "--", sys.executable, str(COMPANION), "--ours"],
                           env=env.env, cwd=env.cwd, check=True, capture_output=True,
                           timeout=60)
            check = loaded(config)
            assert check.ok and check.warning and not check.skipped, check
            assert f"does not run the MCP server {SERVER_NAME!r}" in check.detail
            assert "reload --confirm RELOAD" in check.fix and "same session" in check.fix
            assert "mcp_loaded" in [c.name for c in run_doctor(config).checks if c.warning]
        with TmuxClaude(env) as tui:  # restarted: it loads the server at start
            tui.wait_for("❯", timeout=60)
            config = doctor_config(make_config, env, tui)
            check = wait_until(lambda: (c := loaded(config)).warning is False and c,
                               timeout=30, what="the restarted Claude Code to run our server")
            assert check.ok and not check.skipped
            assert f"runs {SERVER_NAME!r} as pid" in check.detail


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A real script that sleeps whatever its arguments: the kernel shows it as its
    interpreter's command line (`python3 SCRIPT ARGS`), as a console-script MCP server is."""
    path = tmp_path / "bin" / "kael-thread-rebuild-mcp"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    path.chmod(0o755)
    return path


def test_the_command_line_match_on_real_processes(script: Path) -> None:
    with subprocess.Popen([str(script), "--config", "/c.toml"]) as proc:
        try:
            argv = wait_until(lambda: (a := read_cmdline(proc.pid)) and len(a) > 2 and a,
                              what="the script's command line")
            assert argv[1:] == [str(script), "--config", "/c.toml"]  # after its interpreter
            assert McpCommand(command=str(script), args=["--config", "/c.toml"]).runs_as(argv)
            # Registered by name: Claude Code finds it on PATH.
            assert McpCommand(command=script.name, args=["--config", "/c.toml"]).runs_as(argv)
            assert not McpCommand(command=str(script), args=["--config", "/d.toml"]).runs_as(argv)
            assert not McpCommand(command=str(script), args=["/c.toml"]).runs_as(argv)
            assert not McpCommand(command="/elsewhere/kael-thread-rebuild-mcp",
                                  args=["--config", "/c.toml"]).runs_as(argv)
        finally:
            proc.kill()


@pytest.mark.parametrize(("entry", "expected"), [
    ({"command": "sudo", "args": ["-n", "/k/kael-run", "mcp", "a"]},
     McpCommand(command="sudo", args=["-n", "/k/kael-run", "mcp", "a"])),
    ({"type": "stdio", "command": "docker"}, McpCommand(command="docker")),
    ({"type": "http", "url": "http://127.0.0.1:1/mcp"}, None),
    ({"command": "x", "args": "--config /c.toml"}, None),
    ("not an entry", None),
])
def test_the_registration_entry_as_a_command(entry: Any, expected: McpCommand | None) -> None:
    assert McpCommand.of(entry) == expected


def test_a_pointer_instance_is_not_checked(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config(activation="pointer", resume_pointer_path=str(tmp_path / "p" / "s"))
    check = loaded(config)
    assert check.skipped and "pointer runner" in check.detail
