"""A tiny stdio MCP server named ``companion`` with one tool, ``reply(text)``.

It stands in for a chat channel plugin: the assistant "speaks" to the user by calling
``mcp__companion__reply``. Each call is appended to the file named by ``$COMPANION_LOG`` (one JSON
line per call) so tests can check what was sent.

Run: ``python tests/support/companion_mcp.py`` (Claude Code spawns it over stdio).
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("companion")


@server.tool()
def reply(text: str) -> str:
    """Send a message to the user over the companion channel."""
    log = os.environ.get("COMPANION_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return "sent"


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
