"""The systemd base: its D-Bus client, the base itself, and the drill in containers."""
