"""kael-thread-rebuild: a lossless fresh start for long-running Claude Code sessions."""

__version__ = "0.1.0"
