"""Switching bases: one module per way a household runs Claude Code (tmux, pointer, systemd)."""
