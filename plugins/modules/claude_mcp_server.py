#!/usr/bin/python
"""Ansible module: how one MCP server is registered in Claude Code's ~/.claude.json, without
returning anything else of that file (it holds API keys and OAuth tokens)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claude_mcp_server
short_description: Read one user-scope MCP server registration of Claude Code
description:
  - Reads C(mcpServers.SERVER) of Claude Code's global state file (C(~/.claude.json), or
    C($CLAUDE_CONFIG_DIR/.claude.json)) and returns its command line.
  - That file holds the user's API keys and OAuth tokens, so nothing else of it is returned,
    and the values of the server's C(env) are not either (only their names), so a play run with
    C(-v) prints no secret. Read the file with this module, never with C(slurp).
  - Read-only. A missing file is no registration; an unreadable one fails naming the cause.
  - Run it as the Claude user (C(become_user)). Run as root, it refuses a file in a place another
    user can change (one line naming it) rather than read it following that user's symlinks.
version_added: "0.1.0"
options:
  path:
    description: Claude Code's global state file.
    type: path
    required: true
  server:
    description: The MCP server's name.
    type: str
    default: kael-thread-rebuild
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    details: Read-only.
"""

EXAMPLES = r"""
- name: Read the MCP server Claude Code has for the user
  kael.appliance.claude_mcp_server:
    path: /home/kael/.claude.json
  register: registered
"""

RETURN = r"""
registered:
  description:
    - The registration (C(type), C(command), C(args), C(env_names)), or null when there is none.
  returned: success
  type: dict
argv:
  description: Its command and arguments as one list; empty when there is none.
  returned: success
  type: list
  elements: str
"""

import json
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import root_refusal


def registration(text: str, server: str) -> dict[str, Any] | None:
    """SERVER's entry of the state file TEXT, without the values of its environment."""
    data = json.loads(text) if text.strip() else {}
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    entry = servers.get(server) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        return None
    args = entry.get("args")
    env = entry.get("env")
    return {"type": entry.get("type"), "command": entry.get("command"),
            "args": args if isinstance(args, list) else [],
            "env_names": sorted(env) if isinstance(env, dict) else []}


def _text(path: str) -> str:
    """The file's text; a missing file is empty (no registration)."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True},
                       "server": {"type": "str", "default": "kael-thread-rebuild"}},
        supports_check_mode=True,
    )
    path, server = module.params["path"], module.params["server"]
    problem = root_refusal(path)
    if problem is not None:
        module.fail_json(msg=problem)
    try:
        found = registration(_text(path), server)
    except (OSError, ValueError) as exc:  # named by type and position, never by content
        module.fail_json(msg=f"cannot read {path} as Claude Code's JSON state "
                             f"({type(exc).__name__} at {getattr(exc, 'pos', '?')}); Claude "
                             "Code cannot read it either")
    argv = [found["command"], *found["args"]] if found and found["command"] else []
    module.exit_json(changed=False, registered=found, argv=argv)


if __name__ == "__main__":
    main()
