"""Claude Code itself: the versions this project has verified, and which one a household runs."""
