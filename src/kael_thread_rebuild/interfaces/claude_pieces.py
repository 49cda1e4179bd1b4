"""The `claude-pieces` command: what the installer writes for Claude Code, for pasting by hand.

The permission rules, the Stop hook entry and the `claude mcp add` line come from the same
definitions the installer's settings merge uses (`claude_cli`, shipped to hosts as the role's
module_utils), so a household wired by hand ends up as the installer would have left it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..claude_cli import (
    HOOK_STOP,
    HOOK_TIMEOUT,
    MCP_SERVER,
    PROMPTING_TOOLS,
    READ_ONLY_TOOLS,
    mcp_add_argv,
    permission,
    stop_hook_entry,
)
from ..config import Activation, Config
from ..errors import UsageError
from ..state_layout import config_path
from .output import emit


class ClaudePieces(BaseModel):
    """What to paste: `settings` merged into settings.json, `mcp_add` run as the Claude user."""

    settings: dict[str, Any]
    hook_command: str | None
    permissions: list[str]
    asking_tools: list[str]
    mcp_add: list[str]
    mcp_add_command: str


def _config_path(args: argparse.Namespace) -> str:
    return str(Path(config_path(getattr(args, "config", None)) or "").absolute())


def _words(text: str, option: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if not words:
        raise UsageError(f"{option} is empty")
    return words


def pieces(config: Config, config_path: str, hook_command: str | None,
           mcp_command: list[str] | None, claude: str, timeout: int) -> ClaudePieces:
    """The pieces for CONFIG; a pointer base gets no hook (its runner forwards every Stop)."""
    engine = ["kael-thread-rebuild", "--config", config_path]
    if config.activation is Activation.pointer:
        hook_command = None
    elif hook_command is None:
        hook_command = shlex.join([*engine, HOOK_STOP])
    settings: dict[str, Any] = {}
    if hook_command is not None:
        settings["hooks"] = {"Stop": [{"hooks": [stop_hook_entry(hook_command, timeout)]}]}
    rules = [permission(MCP_SERVER, tool) for tool in READ_ONLY_TOOLS]
    settings["permissions"] = {"allow": rules}
    server = mcp_command or ["kael-thread-rebuild-mcp", "--config", config_path]
    argv = mcp_add_argv(claude, MCP_SERVER, server)
    return ClaudePieces(settings=settings, hook_command=hook_command, permissions=rules,
                        asking_tools=[permission(MCP_SERVER, t) for t in PROMPTING_TOOLS],
                        mcp_add=argv, mcp_add_command=shlex.join(argv))


def settings_text(found: ClaudePieces) -> str:
    """The settings block as the installer writes it into an empty settings.json."""
    return json.dumps(found.settings, indent=2, ensure_ascii=False) + "\n"


def _claude_pieces(config: Config, args: argparse.Namespace) -> int:
    mcp = _words(args.mcp_command, "--mcp-command") if args.mcp_command else None
    hook = args.hook_command
    if hook is not None:
        _words(hook, "--hook-command")  # the hook runs through a shell: it must parse
    found = pieces(config, _config_path(args), hook, mcp, args.claude, args.hook_timeout)
    if args.json:
        emit(found, True)
        return 0
    where = f"{config.claude_config_dir or '~/.claude'}/settings.json"
    sys.stdout.write(
        f"# {where}: merge these keys into the file, keeping everything already there\n"
        f"{settings_text(found)}"
        "# the tools that change something keep asking: never allow "
        f"{', '.join(found.asking_tools)}\n"
        "# register the MCP server, as the user Claude Code runs as\n"
        f"{found.mcp_add_command}\n")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             parent: argparse.ArgumentParser) -> None:
    command = commands.add_parser(
        "claude-pieces", parents=[parent],
        help="print the settings.json block and `claude mcp add` line the installer would write",
        description="Print what the installer writes for Claude Code, for a household wired by "
                    "hand: the Stop hook entry and the four read-only tool permissions to merge "
                    "into settings.json, and the `claude mcp add` command that registers the MCP "
                    "server. A pointer base gets no hook (its runner forwards every Stop). It "
                    "changes nothing.")
    command.add_argument("--hook-command", metavar="TEXT",
                         help="the Stop hook's command (default: kael-thread-rebuild --config "
                              "PATH hook-stop; in the appliance: kael-hook --container NAME "
                              "--config PATH --state-dir DIR)")
    command.add_argument("--mcp-command", metavar="TEXT",
                         help="the MCP server's command line (default: kael-thread-rebuild-mcp "
                              "--config PATH; in the appliance: what image/mcp-command.sh "
                              "prints, joined with spaces)")
    command.add_argument("--claude", metavar="PROGRAM", default="claude",
                         help="the Claude Code program in the printed command (default: claude)")
    command.add_argument("--hook-timeout", metavar="SECONDS", type=int, default=HOOK_TIMEOUT,
                         help=f"the hook's timeout (default: {HOOK_TIMEOUT})")
    command.set_defaults(handler=_claude_pieces)
