"""Claude Code integration, the MCP server: this instance's server is registered in a scope the
Claude Code in claude_workdir reads (user, local or project)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .facts import Facts
from .model import Check, failed, passed, skipped
from .reading import json_dict, json_list, read_json

SERVER_NAME = "kael-thread-rebuild"
MCP_COMMAND = "kael-thread-rebuild-mcp"


def global_state_files(config_dir: Path, home: Path | None = None) -> list[Path]:
    """Where Claude Code may keep its global state (user-scope MCP servers) for CONFIG_DIR: in
    it (CLAUDE_CONFIG_DIR set), or with CLAUDE_CONFIG_DIR unset, where the config dir is
    ~/.claude, beside it as ~/.claude.json."""
    home = Path.home() if home is None else home
    files = [config_dir / ".claude.json"]
    if config_dir.name == ".claude":
        files.append(config_dir.parent / ".claude.json")
    if os.path.realpath(config_dir) == os.path.realpath(home / ".claude"):
        files.append(home / ".claude.json")
    unique: list[Path] = []
    for file in files:
        if file not in unique:
            unique.append(file)
    return unique


def _names_our_server(name: str, entry: Any) -> bool:
    if name == SERVER_NAME:
        return True
    if not isinstance(entry, dict):
        return False
    words = [entry.get("command"), *json_list(entry, "args")]
    return any(isinstance(word, str) and MCP_COMMAND in word for word in words)


@dataclass
class _Registrations:
    """The mcpServers tables Claude Code would read, as (scope, file, servers); the files that
    could not be read (problems) and those not mounted here (unseen)."""

    sources: list[tuple[str, Path, dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unseen: list[Path] = field(default_factory=list)

    def read(self, path: Path) -> Any:
        data, problem = read_json(path)
        if problem:
            self.problems.append(problem)
        return data


def _registrations(facts: Facts, state_files: list[Path]) -> _Registrations:
    workdir = facts.config.claude_workdir
    project_keys = {str(workdir), os.path.realpath(workdir)} if workdir else set()
    found = _Registrations()
    for path in state_files:
        if str(path) in facts.unmounted and not path.exists():
            found.unseen.append(path)
            continue
        data = found.read(path)
        found.sources.append(("user scope", path, json_dict(data, "mcpServers")))
        for key in project_keys:
            local = json_dict(json_dict(json_dict(data, "projects"), key), "mcpServers")
            found.sources.append(("local scope", path, local))
    if workdir is not None:
        data = found.read(workdir / ".mcp.json")
        found.sources.append(("project scope", workdir / ".mcp.json",
                              json_dict(data, "mcpServers")))
    return found


def _ours(found: _Registrations) -> tuple[str, str, Path, Any] | None:
    """The first registration of our server: (name, scope, file, entry)."""
    for scope, path, servers in found.sources:
        for server, entry in servers.items():
            if _names_our_server(server, entry):
                return server, scope, path, entry
    return None


def registered_server(facts: Facts) -> tuple[str, Any] | None:
    """Our server's registration as the Claude Code in claude_workdir reads it: (name, entry)."""
    ours = _ours(_registrations(facts, global_state_files(facts.claude_config_dir)))
    return None if ours is None else (ours[0], ours[3])


def check_mcp_server(facts: Facts) -> Check:
    name = "mcp_server"
    state_files = global_state_files(facts.claude_config_dir)
    found = _registrations(facts, state_files)
    ours = _ours(found)
    if ours is not None:
        server, scope, path, _ = ours
        return passed(name, f"{server!r} ({scope}, {path})")
    if found.unseen:
        shown = ", ".join(str(path) for path in found.unseen)
        return skipped(name, f"not checked here: {shown} is not mounted in this container "
                             "(Claude Code replaces it by rename, so only a one-off container "
                             "can show it); image/run-doctor.sh and the installer's doctor "
                             "check it")
    detail = f"no MCP server {SERVER_NAME!r} in {state_files[0]}"
    if found.problems:
        detail += f" ({'; '.join(found.problems)})"
    return failed(name, detail,
                  f"claude mcp add --scope user {SERVER_NAME} -- {MCP_COMMAND} --config "
                  "<config> (the appliance: -- followed by the lines of image/mcp-command.sh) as "
                  "the Claude Code user, with "
                  f"CLAUDE_CONFIG_DIR={facts.claude_config_dir} when that is not ~/.claude")
