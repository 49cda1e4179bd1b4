"""settings.json: the engine's Stop hook among Claude Code's hooks, and what the installer writes
there (and `claude-pieces` prints for a household).

Which instance a Stop hook serves is decided here once (`hook_instance`), for the doctor and for
the installer's settings merge. A hook is this instance's when it feeds hook-stop (a word of the
command, not a substring: `notify-send hook-stopped` is not) and its --config is this instance's
config file (after `~` and symlinks), whatever its --state-dir (hook-stop takes the state dir
from the config; the wrapper only logs its failures there); another instance's when its
--state-dir is another dir or its --config another instance's file; unknown when nothing in it
says (no --config, or a config file that cannot be read from here). The installer replaces or
removes only hooks that are this instance's (never a user's entry on a guess); doctor counts
unknown ones as this instance's (never fails a household on a guess).

Stdlib only, Python 3.9+ (shipped to the managed host like `command_line`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

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
    through the appliance's wrapper `kael-hook`."""
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


THIS, OTHER, UNKNOWN = "this", "other", "unknown"


class Instance(NamedTuple):
    """What tells one instance's Stop hooks from another's (None: not known)."""

    config: str | None  # its config file
    state_dir: str | None
    name: str | None = None


class Served(NamedTuple):
    """Which instance a Stop hook serves: THIS, OTHER or UNKNOWN, and why when not THIS."""

    verdict: str
    why: str = ""


def hook_target(command: str) -> Instance:
    """The instance hook COMMAND names with its --config and --state-dir."""
    return Instance(hook_option(command, "--config"), hook_option(command, "--state-dir"))


def same_path(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (`~` expanded, symlinks followed)."""
    return (os.path.realpath(os.path.expanduser(one))
            == os.path.realpath(os.path.expanduser(other)))


def hook_instance(command: str, ours: Instance,
                  read_config: Callable[[str], Instance | None] | None = None) -> Served | None:
    """Which instance hook COMMAND serves, OURS being this one; None when it does not feed
    hook-stop. READ_CONFIG reads another config file (its instance and state dir), where the
    caller can: a second file of this instance is then told from another instance's."""
    if not runs_hook_stop(command):
        return None
    hook = hook_target(command)
    if hook.config is not None and ours.config is not None and same_path(hook.config,
                                                                         ours.config):
        return Served(THIS)
    if hook.state_dir is not None and ours.state_dir is not None and not same_path(
            hook.state_dir, ours.state_dir):
        return Served(OTHER, f"its --state-dir is {hook.state_dir}, not {ours.state_dir}")
    if hook.config is None:
        return Served(UNKNOWN, "it has no --config: it serves the config its environment "
                               "names where it runs")
    other = read_config(hook.config) if read_config is not None else None
    return _served_by_config(hook.config, other, ours)


def _served_by_config(config: str, other: Instance | None, ours: Instance) -> Served:
    """Which instance a hook serves whose --config CONFIG is not this instance's file, OTHER
    being what that file holds (None: not readable from here)."""
    if other is None or other.state_dir is None or ours.state_dir is None:
        return Served(UNKNOWN, f"its --config {config} is not this instance's config file, "
                               "and what it holds is not known from here")
    if other.name != ours.name or (_placeable(other.state_dir)
                                   and not same_path(other.state_dir, ours.state_dir)):
        return Served(OTHER, f"its --config {config} is instance {other.name!r} with state "
                             f"dir {other.state_dir}")
    if not _placeable(other.state_dir):
        return Served(UNKNOWN, f"its --config {config} names this instance with a state dir "
                               f"in a home not known here ({other.state_dir})")
    return Served(THIS)


def _placeable(path: str) -> bool:
    """Whether PATH can be placed here: not in the home (`~user`) of a user unknown here."""
    return not path.startswith("~") or os.path.expanduser(path) != path


def same_hook(command: str, ours: str) -> bool:
    """Whether hook COMMAND is OURS, or an earlier spelling of it: it serves the same instance
    (whatever else changed: container, wrapper's path, spelling of the config's path)."""
    if command == ours:
        return True
    served = hook_instance(command, hook_target(ours)) if runs_hook_stop(ours) else None
    return served is not None and served.verdict == THIS


def stop_hook_commands(settings: Any) -> Iterator[tuple[int, int, str]]:
    """(group, entry, command) of every command in `hooks.Stop[].hooks[]` of a settings.json
    object; entries of another shape are passed over, as Claude Code passes them over."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    stop = hooks.get("Stop") if isinstance(hooks, dict) else None
    for g, group in enumerate(stop if isinstance(stop, list) else []):
        entries = group.get("hooks") if isinstance(group, dict) else None
        for e, entry in enumerate(entries if isinstance(entries, list) else []):
            command = entry.get("command") if isinstance(entry, dict) else None
            if isinstance(command, str):
                yield g, e, command


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
