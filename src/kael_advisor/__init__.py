"""kael-advisor: Claude Code consults a Kimi Code advisor through MCP (the appliance's second
service). Kept free of imports: the prompt hook loads this package on every prompt."""

__version__ = "0.1.0"
