"""Shared fixtures: every test gets its own project dir, state dir and config."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild import compiled_modules
from kael_thread_rebuild.config import Config, parse_config
from tests.guard import assert_safe_target, install_guard

ConfigFactory = Callable[..., Config]


def pytest_sessionstart(session: pytest.Session) -> None:
    """The suite tests the rules as they are in the checkout: a compiled module older than its
    source (edited after the editable install built it) would test the old ones."""
    stale = [module.__name__ for module in compiled_modules.modules()
             if compiled_modules.older_than_source(module)]
    if stale:
        pytest.exit(f"compiled modules older than their sources: {', '.join(stale)}; rebuild "
                    "them with .ci/setup (README, \"Development\")", returncode=3)


@pytest.fixture(autouse=True)
def _only_safe_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every switching base a test builds refuses a config that could reach a live session."""
    install_guard(monkeypatch)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    path = tmp_path / "projects" / "-home-user-project"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def make_config(tmp_path: Path, project_dir: Path) -> ConfigFactory:
    def build(**overrides: Any) -> Config:
        data: dict[str, Any] = {
            "project_dir": str(project_dir),
            "state_dir": str(tmp_path / "state"),
            "tmux_target": "DO-NOT-CREATE-test:0.0",
            "tmux_socket": f"kael-test-{tmp_path.name}",
        }
        data.update(overrides)
        config = parse_config(data)
        assert_safe_target(config)
        return config

    return build


@pytest.fixture
def single_threaded() -> None:
    """For a test that needs the scan's forked reader: the engine forks only in a process that
    runs no other thread. Threads an earlier test left ending are waited for a moment; one
    still running fails the test by name (it would otherwise fail later as a plan read by one
    process)."""
    deadline = time.monotonic() + 10
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    others = [thread.name for thread in threading.enumerate()
              if thread is not threading.main_thread()]
    assert not others, f"threads left running by an earlier test: {others}"
