"""Live drills: the real Claude Code in a tmux pane, our Stop hook, MCP server and daemon."""
