"""Claude Code integration, the MCP server as the live Claude Code has it: a Claude Code loads
its MCP servers when it starts (2.1.328 runs each stdio server as its own child for its whole
life), so one started before the registration runs without our tools until it restarts."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from ..claude_code import registry
from ..config import Activation, Config
from .facts import Facts
from .mcp import registered_server
from .model import Check, passed, skipped, warned
from .reading import read_cmdline


class McpCommand(BaseModel):
    """A registered stdio MCP server's command as Claude Code starts it: `command` and `args`
    of its `mcpServers` entry."""

    command: str
    args: list[str] = []

    @classmethod
    def of(cls, entry: Any) -> McpCommand | None:
        """The command of a registration entry; None for one that names no stdio command."""
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            return None
        args = entry.get("args") or []
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            return None
        return cls(command=entry["command"], args=args)

    def runs_as(self, argv: list[str]) -> bool:
        """Whether a process with command line ARGV is this command as Claude Code spawns it
        (2.1.328: `command` and `args` as registered, no shell): the program as registered (or
        found on PATH, when registered by name) and the same arguments, possibly after the
        interpreter of a script (`python3 /venv/bin/kael-thread-rebuild-mcp --config ...`)."""
        start = len(argv) - len(self.args) - 1
        if start < 0 or argv[start + 1:] != self.args:
            return False
        program = argv[start]
        return program == self.command or (
            os.sep not in self.command and os.path.basename(program) == self.command)


def restart_fix(config: Config) -> str:
    """How the household has its Claude Code load the MCP server, keeping the conversation: a
    reload restarts it onto the session it runs after its next reply."""
    return (f"reload it: kael-thread-rebuild reload --confirm RELOAD (through `docker exec "
            f"kael-thread-rebuild-{config.instance}` with the appliance), then let it end one "
            "reply: it restarts onto the same session, every word kept")


def check_mcp_loaded(facts: Facts) -> Check:
    """The live Claude Code runs this instance's MCP server: some process under it has the
    registered command line. A warning, never a failure: an install onto a running household
    registers the server while Claude Code runs, and only a restart loads it."""
    name = "mcp_loaded"
    if facts.config.activation is Activation.pointer:
        return skipped(name, "not checked: a pointer runner starts a new Claude Code for every "
                             "prompt, which loads the MCP server")
    found = registered_server(facts)
    server, command = (found[0], McpCommand.of(found[1])) if found else ("", None)
    if command is None:
        return skipped(name, "not checked: no stdio MCP server of this instance is registered "
                             "(see mcp_server)")
    process = facts.claude_process
    if isinstance(process, str):
        return skipped(name, f"not checked: {process}")
    pid = process[0]
    for child in registry.process_tree(pid)[1:]:
        argv = read_cmdline(child)
        if argv is not None and command.runs_as(argv):
            return passed(name, f"the live Claude Code (pid {pid}) runs {server!r} as pid "
                                f"{child}")
    return warned(name, f"the live Claude Code (pid {pid}) does not run the MCP server "
                        f"{server!r} ({command.command} …): it started before the server was "
                        "registered (or the server exited), so the model answers \"No such tool "
                        "available\" for the rebuild tools", restart_fix(facts.config))
