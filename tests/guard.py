"""The suite's guard: no test may address a real tmux server, tmux session or systemd unit.

Every config a test hands to a switching base must pass `assert_safe_target`: the tmux target and
any systemd unit name contain `DO-NOT-CREATE`, the tmux socket is a private one (a `-L` name
marked for tests, or a socket path inside the temp dir), never the default server, and every path
the engine writes lies inside the temp dir. `install_guard` makes every base the suite constructs
check its config first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.switching.dbus import bus_address, socket_path
from kael_thread_rebuild.switching.pointer import PointerBase
from kael_thread_rebuild.switching.systemd import SystemdBase
from kael_thread_rebuild.switching.tmux import TmuxBase

MARK = "DO-NOT-CREATE"
#: Socket names of tests/support's tmux helper.
TEST_SOCKET_PREFIX = "kael-test-"
GUARDED_BASES: tuple[type[TmuxBase] | type[PointerBase] | type[SystemdBase], ...] = (
    TmuxBase, PointerBase, SystemdBase)


class UnsafeTarget(AssertionError):
    """A test config could reach something outside the test's own sandbox."""


def _temp_root() -> Path:
    return Path(os.path.realpath(tempfile.gettempdir()))


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(root)


def _marked_socket_name(name: str) -> bool:
    return MARK in name or name.startswith(TEST_SOCKET_PREFIX)


def tmux_socket_dir() -> Path:
    """Where tmux keeps `-L` sockets (and the default one) for this uid."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(os.path.realpath(base)) / f"tmux-{os.getuid()}"


def _socket_problem(socket: str | None) -> str | None:
    if socket is None:
        return "tmux_socket is unset, which addresses the default tmux server"
    if "/" not in socket:
        if not _marked_socket_name(socket):
            return (f"tmux socket name {socket!r} is not a test socket "
                    f"(needs {MARK!r} or the prefix {TEST_SOCKET_PREFIX!r})")
        return None
    path = Path(socket)
    if not _inside(path, _temp_root()):
        return f"tmux socket path {socket!r} is outside the temp dir"
    if _inside(path, tmux_socket_dir()) and not _marked_socket_name(path.name):
        return f"tmux socket path {socket!r} is a shared tmux socket, not a test one"
    return None


def target_problems(config: Config) -> list[str]:
    problems = []
    if MARK not in config.tmux_target:
        problems.append(f"tmux_target {config.tmux_target!r} lacks {MARK!r}")
    socket_problem = _socket_problem(config.tmux_socket)
    if socket_problem:
        problems.append(socket_problem)
    if config.systemd_unit is not None and MARK not in config.systemd_unit:
        problems.append(f"systemd_unit {config.systemd_unit!r} lacks {MARK!r}")
    root = _temp_root()
    for key in ("project_dir", "state_dir", "claude_workdir", "claude_config_dir",
                "resume_pointer_path"):
        value = getattr(config, key)
        if value is not None and not _inside(value, root):
            problems.append(f"{key} {str(value)!r} is outside the temp dir")
    return problems


def assert_safe_target(config: Config) -> None:
    problems = target_problems(config)
    if problems:
        raise UnsafeTarget("unsafe test config: " + "; ".join(problems))


def bus_problem(config: Config) -> str | None:
    """A systemd base may only talk to a bus whose socket a test made in the temp dir."""
    path = socket_path(bus_address(config.systemd_bus))
    if path.startswith("\0") or not _inside(Path(path), _temp_root()):
        return f"the {config.systemd_bus.value} bus socket {path!r} is outside the temp dir"
    return None


def install_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every switching base built while the fixture lasts check its config first."""
    for cls in GUARDED_BASES:
        original = cls.__init__

        def checked(self: object, config: Config, _original: object = original,
                    _cls: type = cls, **kwargs: object) -> None:
            assert_safe_target(config)
            problem = bus_problem(config) if _cls is SystemdBase else None
            if problem:
                raise UnsafeTarget(f"unsafe test config: {problem}")
            _original(self, config, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(cls, "__init__", checked)
