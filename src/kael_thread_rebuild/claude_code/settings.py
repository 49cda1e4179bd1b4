"""settings.json: the engine's Stop hook among Claude Code's hooks, and what the installer writes
there (and `claude-pieces` prints for a household).

Stdlib only, Python 3.9+ (shipped to the managed host like `command_line`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from .command_line import basename

HOOK_STOP = "hook-stop"
#: The appliance's Stop hook wrapper on the host (image/kael-hook): docker exec … hook-stop.
HOOK_WRAPPER = "kael-hook"


def _hook_words(command: str) -> list[str]:
    """The words of a hook command, and those of a command string among them (`sh -c '…'`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return [*words, *(inner for word in words if " " in word for inner in _hook_words(word))]


def runs_hook_stop(command: str) -> bool:
    """Whether a hook command feeds the engine's hook-stop: directly, through `docker exec`, or
    through the appliance's wrapper `kael-hook`. The installer and doctor both use this."""
    return any(word == HOOK_STOP or basename(word) == HOOK_WRAPPER
               for word in _hook_words(command))


def hook_option(command: str, name: str) -> str | None:
    """The value of option NAME (`--config`) in a hook command."""
    words = _hook_words(command)
    for index, word in enumerate(words):
        if word == name and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


def same_hook(command: str, ours: str) -> bool:
    """Whether hook COMMAND is OURS, or an earlier spelling of it: both feed hook-stop with the
    same --config (one instance's config file), whatever else changed (container, paths)."""
    if command == ours:
        return True
    config = hook_option(ours, "--config")
    return (config is not None and runs_hook_stop(command) and runs_hook_stop(ours)
            and hook_option(command, "--config") == config)


# -- what the installer writes for Claude Code (and `claude-pieces` prints for a household) ----

#: The MCP server's name in Claude Code's registration and in the permission rules.
MCP_SERVER = "kael-thread-rebuild"
#: The Stop hook's timeout in seconds (the role's kael_hook_timeout defaults to it).
HOOK_TIMEOUT = 10


def permission(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def stop_hook_entry(command: str, timeout: int) -> dict[str, object]:
    """Our entry in `hooks.Stop[].hooks` of settings.json."""
    return {"type": "command", "command": command, "timeout": timeout}


def mcp_add_argv(claude: str, server: str, command: Sequence[str]) -> list[str]:
    """The `claude mcp add` that registers COMMAND as the user's MCP server SERVER."""
    return [claude, "mcp", "add", "--scope", "user", server, "--", *command]
