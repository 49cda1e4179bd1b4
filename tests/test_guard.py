"""The guard the project rules require: no test can reach a real tmux session or systemd unit."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.switching.factory import make_base
from kael_thread_rebuild.switching.pointer import PointerBase
from kael_thread_rebuild.switching.tmux import TmuxBase, TmuxUnreachable
from tests.conftest import ConfigFactory
from tests.guard import (
    MARK,
    UnsafeTarget,
    assert_safe_target,
    install_guard,
    target_problems,
    tmux_socket_dir,
)
from tests.support.claude_env import TmuxClaude, claude_available, make_claude_env
from tests.switching.sandbox import SLEEPER, PrivateTmux, safe_config, tmux_config

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _default_server() -> tuple[bool, set[str]]:
    """Whether the default socket exists, and the sessions of the default server (read-only)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    proc = subprocess.run(["tmux", "list-sessions", "-F", "#{session_id} #{session_name}"],
                          env=env, capture_output=True, text=True, timeout=10, check=False)
    sessions = set(proc.stdout.splitlines()) if proc.returncode == 0 else set()
    return (tmux_socket_dir() / "default").exists(), sessions


def test_configs_of_the_test_helpers_pass(tmp_path: Path, make_config: ConfigFactory) -> None:
    assert_safe_target(safe_config(tmp_path))
    assert_safe_target(safe_config(tmp_path, activation="pointer"))
    assert_safe_target(make_config())
    with PrivateTmux(tmp_path) as tmux:
        assert_safe_target(tmux_config(tmux, f"{MARK}-{tmux.tag}-1:0.0", tmp_path))
    driver = TmuxClaude(make_claude_env(tmp_path / "claude", "http://127.0.0.1:9"))
    assert_safe_target(safe_config(tmp_path, tmux_socket=driver.socket,
                                   tmux_target=driver.target))


@pytest.mark.parametrize(("overrides", "problem"), [
    ({"tmux_socket": None}, "default tmux server"),
    ({"tmux_socket": "default"}, "not a test socket"),
    ({"tmux_socket": "cc"}, "not a test socket"),
    ({"tmux_socket": "/run/tmux/cc.sock"}, "outside the temp dir"),
    ({"tmux_socket": str(tmux_socket_dir() / "default")}, "shared tmux socket"),
    ({"tmux_target": "cc:0.0"}, "tmux_target 'cc:0.0' lacks"),
    ({"tmux_target": "%0"}, "lacks"),
    ({"activation": "systemd", "systemd_unit": "kael-cc.service"}, "systemd_unit"),
    ({"state_dir": "~/.local/state/kael-thread-rebuild"}, "state_dir"),
    ({"claude_config_dir": str(Path.home() / ".claude")}, "claude_config_dir"),
    ({"resume_pointer_path": "/var/lib/claude/pointer"}, "resume_pointer_path"),
])
def test_configs_that_could_reach_real_things_are_refused(
        tmp_path: Path, overrides: dict[str, object], problem: str) -> None:
    config = safe_config(tmp_path, **overrides)
    with pytest.raises(UnsafeTarget, match=problem):
        assert_safe_target(config)


def test_every_problem_is_named(tmp_path: Path) -> None:
    config = Config.model_validate({"project_dir": "/srv/projects/x", "tmux_socket": "default"})
    assert len(target_problems(config)) == 4  # target, socket, project_dir, state_dir


def test_installed_guard_stops_every_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_guard(monkeypatch)
    unsafe = safe_config(tmp_path, tmux_target="cc:0.0", activation="pointer")
    for build in (TmuxBase, PointerBase, make_base):
        with pytest.raises(UnsafeTarget):
            build(unsafe)
    assert isinstance(make_base(safe_config(tmp_path)), TmuxBase)


@needs_tmux
def test_the_suites_tmux_use_never_touches_the_default_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _default_server()
    # Even a test run from inside someone's tmux must not reach that server.
    monkeypatch.setenv("TMUX", f"{tmux_socket_dir() / 'default'},1,0")
    monkeypatch.setenv("TMUX_PANE", "%0")

    with PrivateTmux(tmp_path) as tmux:
        target = tmux.new_session(SLEEPER, cwd=tmp_path)
        tmux.run("split-window", "-t", target, *SLEEPER)
        base = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=tmp_path,
                                    resume_command=[*SLEEPER, "{session_id}"]))
        assert base.alive()
        base.switch_to(str(uuid.uuid4()))
        assert base.identity().token["pane_id"] == tmux.display(target, "#{pane_id}")
    gone = TmuxBase(safe_config(tmp_path, tmux_socket=f"kael-test-{MARK}-{uuid.uuid4().hex}"))
    with pytest.raises(TmuxUnreachable):
        gone.identity()
    if claude_available():
        with TmuxClaude(make_claude_env(tmp_path / "claude", "http://127.0.0.1:9")) as driver:
            driver.capture()

    assert _default_server() == before
