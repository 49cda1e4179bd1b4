"""The table of actions is the one declaration: the CLI's subcommands, the MCP tools (as the
start-up path lists them, with their annotations) and the installer's permission list (the
role's generated file, as Ansible imports it) all agree with it."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from pydantic import BaseModel

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import Refused
from kael_thread_rebuild.interfaces import cli
from kael_thread_rebuild.interfaces.action_model import Call
from kael_thread_rebuild.interfaces.actions import ACTIONS, role_tools_text, tool_names
from kael_thread_rebuild.interfaces.mcp_server import SNAPSHOT
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationStatus
from tests.conftest import ConfigFactory
from tests.installer.conftest import PLUGINS, REPO, load_module_utils

TOOLS = {action.tool.name: action for action in ACTIONS if action.tool is not None}
ROLE_TOOLS = PLUGINS / "module_utils" / "kael_mcp_tools.py"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    commands = next(group for group in parser._actions
                    if isinstance(group, argparse._SubParsersAction))
    return dict(commands.choices)


def _options(command: argparse.ArgumentParser) -> dict[str, bool]:
    """The subcommand's own options (dest -> required), without --help, --config, --json."""
    return {option.dest: option.required for option in command._actions
            if option.dest not in {"help", "config", "json"}}


def _required(model: type[BaseModel]) -> dict[str, bool]:
    return {name: field.is_required() for name, field in model.model_fields.items()}


def test_every_subcommand_is_an_action_with_the_input_models_fields() -> None:
    commands = _subcommands()
    assert list(commands) == [action.name for action in ACTIONS]
    for action in ACTIONS:
        command = commands[action.name]
        assert command.description == action.description
        assert _options(command) == _required(action.input), action.name
        assert command.get_default("action") is action


def _listed_tools() -> dict[str, list[dict[str, Any]]]:
    """tools/list as the start-up path answers it, per protocol version."""
    versions = json.loads(SNAPSHOT.read_bytes())["protocol_versions"]
    return {version: answers["tools/list"]["result"]["tools"]
            for version, answers in versions.items()}


def test_the_listed_tools_are_the_tables_with_honest_annotations() -> None:
    for version, tools in _listed_tools().items():
        assert [tool["name"] for tool in tools] == \
            tool_names(changes=False) + tool_names(changes=True), version
        for tool in tools:
            action = TOOLS[tool["name"]]
            assert action.tool is not None
            assert tool["description"] == action.tool.description
            assert tool["annotations"] == {
                "readOnlyHint": not action.changes, "destructiveHint": action.changes,
                "idempotentHint": not action.changes, "openWorldHint": False}, tool["name"]
            schema = tool["inputSchema"]
            assert set(schema["properties"]) == set(action.input.model_fields)  # sorted keys
            assert schema.get("required", []) == [name for name, required in
                                                  _required(action.input).items() if required]
            assert tool["outputSchema"]["title"] == action.tool_output().__name__


def test_a_tool_that_changes_something_needs_its_confirmation_word() -> None:
    for name, action in TOOLS.items():
        fields = action.input.model_fields
        if not action.changes:
            assert action.confirmation is None and "confirmation" not in fields, name
            continue
        assert action.confirmation, name
        description = fields["confirmation"].description or ""
        assert description.startswith(f"exactly {action.confirmation}"), name


def test_the_role_allows_exactly_the_read_only_tools() -> None:
    """The generated file is current, and it is what the settings module imports."""
    assert ROLE_TOOLS.read_text(encoding="utf-8") == role_tools_text(), (
        "regenerate: python -m kael_thread_rebuild.interfaces.actions --write-role-tools "
        f"{ROLE_TOOLS.relative_to(REPO)}")
    settings = load_module_utils("kael_settings")
    assert list(settings.READ_ONLY_TOOLS) == tool_names(changes=False)
    assert list(settings.PROMPTING_TOOLS) == tool_names(changes=True)
    assert set(settings.READ_ONLY_TOOLS) == {name for name, action in TOOLS.items()
                                             if not action.changes}


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


def test_each_confirmation_word_is_the_one_the_service_checks(config: Config) -> None:
    """A changing action refuses anything but its word, before it looks at the state."""
    for action in ACTIONS:
        if action.confirmation is None:
            continue
        given = {name: "20260101T000000Z-00000000" if name == "operation_id" else "r"
                 for name in action.input.model_fields}
        with pytest.raises(Refused, match=f"exactly {action.confirmation}"):
            action.run(Call(config=config, via="cli"), action.input.model_validate(given))


def test_a_request_says_whether_it_joined_the_one_waiting(config: Config) -> None:
    first = service.request_rebuild(config, "one", service.REBUILD_WORD)
    second = service.request_rebuild(config, "two", service.REBUILD_WORD)
    assert not first.joined_existing and second.joined_existing
    assert second.operation.operation_id == first.operation.operation_id
    assert second.operation.status is OperationStatus.pending


def test_the_architecture_page_shows_the_table() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in page.split("## The table of actions", 1)[1].split("\n## ", 1)[0]
            .splitlines()
            if line.startswith("| ") and not line.startswith("| action ")]
    assert [(row[0], row[1].split()[0], row[2], row[3], row[4].split(",")[0]) for row in rows] == [
        (action.name, "yes" if action.changes else "no", action.confirmation or "",
         action.tool.name if action.tool else "",
         "" if action.tool is None else "no" if action.changes else "yes")
        for action in ACTIONS]
