"""The modules the kael_advisor role merges with (claude_settings_block, kimi_config,
marked_block), run in-process as Ansible runs them: each puts its part beside the user's own,
a second run changes nothing, and taking it out gives the file back byte for byte."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import RunModule

RULE = "mcp__advisor-mcp__"
BLOCK = {"permissions": {"allow": [f"{RULE}advisor_poll", f"{RULE}advisor_list_tasks"],
                         "ask": [f"{RULE}advisor_consult", f"{RULE}advisor_create_task",
                                 f"{RULE}advisor_close_task"]},
         "env": {"MCP_TOOL_TIMEOUT": "600000"},
         "hooks": {"UserPromptSubmit": [{"hooks": [
             {"type": "command", "command": "python3 -I /x/kael-advisor-hook.pyz",
              "timeout": 10}]}]}}
SETTINGS = [
    '{\n  "model": "opus",\n  "hooks": {\n    "UserPromptSubmit": [\n      {"hooks": [{"type":'
    ' "command", "command": "mine"}]}\n    ]\n  },\n  "permissions": {"allow": ["Bash(ls)"]},\n'
    '  "env": {"FOO": "caf\\u00e9", "N": 1.50}\n}\n',
    '{"a":1}',
    '{\n  "permissions": null,\n  "hooks": {}\n}\n',
    "{}\n",
    '{"env": {"MCP_TOOL_TIMEOUT": "5"}, "permissions": {"ask": []}}',
]
KIMI = ['', 'theme = "dark"\n\n[providers.mine]\ntype = "kimi"\napi_key = "users-own"\n',
        'telemetry = true\n[model_catalog]\nrefresh_on_start = true', 'x = 1']
PROVIDER = {"base_url": "http://127.0.0.1:9/v1", "model": "kimi-for-coding",
            "api_key": 'sk-"secret"\\1'}
CLAUDE_MD = "<!-- kael-advisor: begin (x) -->\n## Advisor\n\nrules\n<!-- kael-advisor: end -->\n"


def settings(run_module: RunModule, path: Path, state: str = "present",
             **more: Any) -> dict[str, Any]:
    return run_module("claude_settings_block", {
        "path": str(path), "state": state, "block": BLOCK if state == "present" else {},
        "backup_dir": str(path.parent / "backups"), **more})


@pytest.mark.parametrize("text", SETTINGS)
def test_the_settings_block_comes_and_goes_byte_for_byte(
        run_module: RunModule, tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    added = settings(run_module, path)
    assert added["changed"], added
    data = json.loads(path.read_text())
    assert data["permissions"]["allow"][-2:] == BLOCK["permissions"]["allow"]
    assert data["permissions"]["ask"][-3:] == BLOCK["permissions"]["ask"]
    assert data["hooks"]["UserPromptSubmit"][-1] == BLOCK["hooks"]["UserPromptSubmit"][0]
    assert data["env"]["MCP_TOOL_TIMEOUT"] == json.loads(text).get("env", {}).get(
        "MCP_TOOL_TIMEOUT", "600000")  # a value of the user's stays
    assert not settings(run_module, path)["changed"]
    removed = settings(run_module, path, "absent")
    assert removed["changed"] and path.read_text() == text
    assert not (tmp_path / "backups" / "settings.json.added.json").exists()


def test_the_settings_block_keeps_what_the_user_had_or_changed(
        run_module: RunModule, tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"permissions": {"allow": [f"{RULE}advisor_poll"]}}))
    settings(run_module, path)
    data = json.loads(path.read_text())
    data["env"]["MCP_TOOL_TIMEOUT"] = "1"  # the user changes our variable
    path.write_text(json.dumps(data))
    gone = settings(run_module, path, "absent")
    after = json.loads(path.read_text())
    assert after["permissions"]["allow"] == [f"{RULE}advisor_poll"]  # the user's own rule
    assert after["env"] == {"MCP_TOOL_TIMEOUT": "1"}
    assert "left as found" in json.dumps(gone), gone
    assert "hooks" not in after and "ask" not in after["permissions"]


def test_a_settings_file_of_another_shape_is_refused_untouched(
        run_module: RunModule, tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"hooks": {"UserPromptSubmit": {}}}')
    refused = settings(run_module, path)
    assert refused["failed"] and "hooks.UserPromptSubmit is a JSON dict" in refused["msg"]
    assert path.read_text() == '{"hooks": {"UserPromptSubmit": {}}}'


def kimi(run_module: RunModule, path: Path, state: str = "present", **more: Any
         ) -> dict[str, Any]:
    return run_module("kimi_config", {"path": str(path), "state": state,
                                      **(PROVIDER if state == "present" else {}), **more},
                      diff=True)


@pytest.mark.parametrize("text", KIMI)
def test_the_provider_comes_and_goes_byte_for_byte(
        run_module: RunModule, tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    if text:
        path.write_text(text)
        path.chmod(0o644)
    added = kimi(run_module, path)
    assert added["changed"] and PROVIDER["api_key"] not in json.dumps(added)
    config = tomllib.loads(path.read_text())
    assert config["default_model"] == "kael-advisor"
    assert config["providers"]["kael-advisor"]["api_key"] == PROVIDER["api_key"]
    assert config["models"]["kael-advisor"]["model"] == "kimi-for-coding"
    assert path.stat().st_mode & 0o777 == 0o600  # it holds the key
    assert not kimi(run_module, path)["changed"]
    removed = kimi(run_module, path, "absent", created=not text)
    assert removed["changed"]
    assert (path.read_text() == text) if text else not path.exists()


def test_a_default_model_of_the_users_is_refused(run_module: RunModule, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('default_model = "mine"\n')
    refused = kimi(run_module, path)
    assert refused["failed"] and "default_model is set already" in refused["msg"]
    assert path.read_text() == 'default_model = "mine"\n'


@pytest.mark.parametrize("text", ["", "# Mine\n\nrules of mine\n", "no newline at the end"])
def test_the_claude_md_block_comes_and_goes_byte_for_byte(
        run_module: RunModule, tmp_path: Path, text: str) -> None:
    path = tmp_path / "CLAUDE.md"
    if text:
        path.write_text(text)
    added = run_module("marked_block", {"path": str(path), "block": CLAUDE_MD})
    assert added["changed"] and added["created"] == (not text)
    assert CLAUDE_MD in path.read_text() and text in path.read_text()
    again = run_module("marked_block", {"path": str(path), "block": CLAUDE_MD})
    assert not again["changed"]
    removed = run_module("marked_block", {"path": str(path), "block": CLAUDE_MD,
                                          "state": "absent", "created": not text})
    assert removed["changed"]
    assert (path.read_text() == text) if text else not path.exists()
