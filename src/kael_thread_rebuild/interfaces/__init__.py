"""The ways in: the table of actions and what is built from it (the command line, the MCP
tools, the Stop hook's fast path, what the installer writes)."""
