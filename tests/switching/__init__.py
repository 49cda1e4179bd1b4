"""Tests of the switching bases: real tmux on private sockets, the registry, the pointer."""
