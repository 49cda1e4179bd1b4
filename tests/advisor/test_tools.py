"""The five tools are declared once (`kael_advisor.tools.TOOLS`): the MCP server's snapshot, the
permission lines of the settings block and the table in docs/advisor.md all agree with it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from kael_advisor import pieces
from kael_advisor.mcp_tools import SNAPSHOT, snapshot
from kael_advisor.tools import TOOLS
from tests.advisor.advisor_env import CLI_BIN

DOCS = Path(__file__).resolve().parents[2] / "docs" / "advisor.md"
NAMES = ["advisor_consult", "advisor_poll", "advisor_create_task", "advisor_list_tasks",
         "advisor_close_task"]


def test_the_five_tools_of_the_spec() -> None:
    assert [found.name for found in TOOLS] == NAMES
    assert {found.name: found.permission for found in TOOLS} == {
        "advisor_consult": "ask", "advisor_poll": "allow", "advisor_create_task": "ask",
        "advisor_list_tasks": "allow", "advisor_close_task": "ask"}


def test_the_snapshot_is_the_servers_answers() -> None:
    """Stale after a change to a tool: `python -m kael_advisor.mcp_tools` records it again."""
    recorded = json.loads(SNAPSHOT.read_text())
    assert recorded == snapshot()
    for answers in recorded["protocol_versions"].values():
        listed = answers["tools/list"]["result"]["tools"]
        assert [tool["name"] for tool in listed] == NAMES
        assert {tool["name"]: tool["annotations"]["readOnlyHint"] for tool in listed} == {
            found.name: found.read_only for found in TOOLS}


def test_the_settings_block_gives_each_tool_its_permission() -> None:
    done = subprocess.run([str(CLI_BIN), "pieces", "--json"], capture_output=True, text=True,
                          timeout=60, check=True)
    printed = json.loads(done.stdout)

    assert printed["settings"]["permissions"] == {
        kind: [f"mcp__advisor-mcp__{found.name}" for found in TOOLS if found.permission == kind]
        for kind in ("allow", "ask")}
    assert printed["settings"]["env"] == {"MCP_TOOL_TIMEOUT": "600000"}
    hook = printed["settings"]["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert hook["command"].endswith("kael-advisor-hook")
    assert printed["mcp_add"].startswith("claude mcp add -s user advisor-mcp -- ")


def test_the_docs_table_is_the_declaration() -> None:
    """Stale after a change to a tool: paste `kael-advisor pieces docs-table` into the page."""
    assert pieces.docs_table() in DOCS.read_text()


def test_the_templates_name_only_declared_tools() -> None:
    found = pieces.templates()

    assert sorted(found) == ["CLAUDE.md", "commands/advisor.md", "commands/blueprint.md",
                             "commands/review.md"]
    block = found["CLAUDE.md"].strip().splitlines()
    assert block[0].startswith("<!-- kael-advisor: begin") and \
        block[-1] == "<!-- kael-advisor: end -->"
    for name, text in found.items():
        named = set(re.findall(r"`(advisor_[a-z_]+)`", text))
        assert named and named <= {tool.name for tool in TOOLS}, name
