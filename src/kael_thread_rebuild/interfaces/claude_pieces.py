"""The `claude-pieces` action: what the installer writes for Claude Code, for pasting by hand.

The Stop hook entry and the `claude mcp add` line come from the same definitions the
installer's settings merge uses (`claude_code.settings`, shipped to hosts in the role's
module_utils), the tool permissions from the table of actions (the role's generated
`kael_mcp_tools.py`), so a household wired by hand ends up as the installer would have left it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..claude_code.settings import (
    HOOK_STOP,
    MCP_SERVER,
    mcp_add_argv,
    permission,
    stop_hook_entry,
)
from ..config import Activation, Config
from ..errors import UsageError
from ..state_layout import config_path as given_config_path


class ClaudePieces(BaseModel):
    """What to paste: `settings` merged into settings.json, `mcp_add` run as the Claude user."""

    settings: dict[str, Any]
    hook_command: str | None
    permissions: list[str]
    asking_tools: list[str]
    mcp_add: list[str]
    mcp_add_command: str
    #: where the settings go, for the text output
    settings_path: str = Field(exclude=True)


def config_path(given: str | None) -> str:
    """The config file as the pieces name it: the `--config` given, else the environment's."""
    return str(Path(given_config_path(given) or "").absolute())


def words(text: str, option: str) -> list[str]:
    """TEXT split as a shell would; OPTION names it when it does not split."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if not words:
        raise UsageError(f"{option} is empty")
    return words


class Wiring(BaseModel):
    """What to wire: the hook and MCP server commands (None: the defaults), the Claude Code
    program, the hook's timeout, and the MCP tools allowed without asking and those that keep
    asking."""

    hook_command: str | None
    mcp_command: list[str] | None
    claude: str
    timeout: int
    allowed: Sequence[str]
    asking: Sequence[str]


def pieces(config: Config, path: str, wiring: Wiring) -> ClaudePieces:
    """The pieces for CONFIG (read from PATH); a pointer base gets no hook (its runner forwards
    every Stop)."""
    engine = ["kael-thread-rebuild", "--config", path]
    hook_command = wiring.hook_command
    if config.activation is Activation.pointer:
        hook_command = None
    elif hook_command is None:
        hook_command = shlex.join([*engine, HOOK_STOP])
    settings: dict[str, Any] = {}
    if hook_command is not None:
        settings["hooks"] = {"Stop": [{"hooks": [stop_hook_entry(hook_command,
                                                                  wiring.timeout)]}]}
    rules = [permission(MCP_SERVER, tool) for tool in wiring.allowed]
    settings["permissions"] = {"allow": rules}
    server = wiring.mcp_command or ["kael-thread-rebuild-mcp", "--config", path]
    argv = mcp_add_argv(wiring.claude, MCP_SERVER, server)
    return ClaudePieces(settings=settings, hook_command=hook_command, permissions=rules,
                        asking_tools=[permission(MCP_SERVER, t) for t in wiring.asking],
                        mcp_add=argv, mcp_add_command=shlex.join(argv),
                        settings_path=f"{config.claude_config_dir or '~/.claude'}/settings.json")


def settings_text(found: ClaudePieces) -> str:
    """The settings block as the installer writes it into an empty settings.json."""
    return json.dumps(found.settings, indent=2, ensure_ascii=False) + "\n"
