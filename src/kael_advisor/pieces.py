"""What Claude Code is given to use the advisor, written from the tools' declaration: the
permission lines, the settings block (permissions, `MCP_TOOL_TIMEOUT`, the prompt hook), the
`claude mcp add` line, the lines that copy the templates (slash commands, CLAUDE.md block) by
hand, and the docs' table of tools."""

from __future__ import annotations

import shlex
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

from .tools import TOOLS

SERVER_NAME = "advisor-mcp"
MCP_TOOL_TIMEOUT_MS = "600000"
HOOK_TIMEOUT_SECONDS = 10


def permission(tool_name: str) -> str:
    return f"mcp__{SERVER_NAME}__{tool_name}"


def permissions() -> dict[str, list[str]]:
    return {kind: [permission(t.name) for t in TOOLS if t.permission == kind]
            for kind in ("allow", "ask")}


def program(name: str) -> str:
    """NAME's path beside this Python (the package's scripts), else NAME on the PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def settings() -> dict[str, Any]:
    """The block merged into Claude Code's settings.json."""
    return {
        "permissions": permissions(),
        "env": {"MCP_TOOL_TIMEOUT": MCP_TOOL_TIMEOUT_MS},
        "hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": shlex.quote(program("kael-advisor-hook")),
             "timeout": HOOK_TIMEOUT_SECONDS}]}]},
    }


def mcp_add_line() -> str:
    return shlex.join(["claude", "mcp", "add", "-s", "user", SERVER_NAME, "--",
                       program("kael-advisor-mcp")])


def templates_dir() -> Path:
    return Path(str(files("kael_advisor").joinpath("templates")))


def templates() -> dict[str, str]:
    """The files the installer merges, by where they go under Claude Code's config directory:
    the marked advisor-discipline block of CLAUDE.md and the slash commands."""
    root = templates_dir()
    found = {"CLAUDE.md": root.joinpath("CLAUDE.md").read_text(encoding="utf-8")}
    for command in sorted(root.joinpath("commands").iterdir(), key=lambda entry: entry.name):
        found[f"commands/{command.name}"] = command.read_text(encoding="utf-8")
    return found


def copy_lines(config: Path) -> list[str]:
    """Shell lines that install the templates by hand into Claude Code's config directory
    CONFIG, each after a comment: the slash commands, then the advisor-discipline block."""
    root, commands = templates_dir(), config / "commands"
    slash = ", ".join("/" + Path(name).stem for name in templates() if name.startswith("commands/"))
    return [
        f"# optional, the slash commands {slash}:",
        f"mkdir -p {shlex.quote(str(commands))} && "
        f"cp {shlex.quote(str(root / 'commands'))}/*.md {shlex.quote(str(commands))}/",
        "# optional, the advisor's rules for Claude Code in every project (or append them to one"
        " project's CLAUDE.md):",
        f"cat {shlex.quote(str(root / 'CLAUDE.md'))} >> {shlex.quote(str(config / 'CLAUDE.md'))}",
    ]


def docs_table() -> str:
    rows = ["| tool | permission | parameters | does |", "|---|---|---|---|"]
    for found in TOOLS:
        fields = ", ".join(f"`{name}`" + ("" if field.is_required() else "?")
                           for name, field in found.input.model_fields.items())
        rows.append(f"| `{found.name}` | {found.permission} | {fields or '-'} | "
                    f"{found.description} |")
    return "\n".join(rows) + "\n"
