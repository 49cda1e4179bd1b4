"""claude_mcp_server: the MCP registration read from ~/.claude.json, and nothing else of that
file (it holds API keys and OAuth tokens) in what a play prints, even with -v."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.installer.conftest import REPO, VENV_BIN, RunModule, ansible_env

SECRET = "sk-ant-api03-SECRET-never-printed"
STATE = {
    "primaryApiKey": SECRET,
    "oauthAccount": {"accessToken": SECRET + "-oauth"},
    "mcpServers": {
        "kael-thread-rebuild": {"type": "stdio", "command": "docker",
                                "args": ["run", "-i", "--rm", "kael:latest"],
                                "env": {"TOKEN": SECRET + "-env"}},
        "other": {"type": "stdio", "command": "x", "args": []},
    },
}


def test_returns_the_registration_alone(run_module: RunModule, tmp_path: Path) -> None:
    state = tmp_path / ".claude.json"
    state.write_text(json.dumps(STATE))
    result = run_module("claude_mcp_server", {"path": str(state)})
    assert result["argv"] == ["docker", "run", "-i", "--rm", "kael:latest"]
    assert result["registered"]["env_names"] == ["TOKEN"]
    assert SECRET not in json.dumps(result)
    missing = run_module("claude_mcp_server", {"path": str(tmp_path / "none.json")})
    assert missing["registered"] is None and missing["argv"] == []
    state.write_text('{"primaryApiKey": "' + SECRET + '", oops}')
    broken = run_module("claude_mcp_server", {"path": str(state)})
    assert broken["failed"] and SECRET not in broken["msg"]


def test_verbose_ansible_prints_no_secret(tmp_path: Path) -> None:
    state = tmp_path / ".claude.json"
    state.write_text(json.dumps(STATE))
    env = ansible_env(tmp_path)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-vvv", "-m",
         "kael.appliance.claude_mcp_server", "-e",
         f"ansible_python_interpreter={sys.executable}", "-a", json.dumps({"path": str(state)})],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"kael:latest"' in proc.stdout and SECRET not in proc.stdout + proc.stderr


def _leaves(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks of TASKS, a block's own tasks in place of the block."""
    found: list[dict[str, Any]] = []
    for task in tasks:
        parts = [task[key] for key in ("block", "rescue", "always") if key in task]
        found.extend(_leaves([t for part in parts for t in part]) if parts else [task])
    return found


def test_the_role_never_reads_the_state_file_whole() -> None:
    """The role used to slurp ~/.claude.json, which -v then printed, API key and all."""
    for path in (REPO / "roles").glob("*/tasks/*.yml"):
        for task in _leaves(yaml.safe_load(path.read_text()) or []):
            text = json.dumps(task)
            if "claude_state_file" in text or ".claude.json" in text:
                assert "slurp" not in text, f"{path}: {task['name']}"
