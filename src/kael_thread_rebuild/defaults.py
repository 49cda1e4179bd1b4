"""Constants the Stop hook's fast path needs, kept free of heavy imports."""

from __future__ import annotations

CONFIG_ENV = "KAEL_REBUILD_CONFIG"
DEFAULT_STATE_DIR = "~/.local/state/kael-thread-rebuild"
DEFAULT_SPEECH_TOOLS = ("mcp__*companion*__reply", "mcp__*telegram*__reply")
