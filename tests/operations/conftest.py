"""Fixtures for the operations tests: fast timings, a pointer target, a source transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations.store import OperationStore
from tests.builder import SESSION
from tests.conftest import ConfigFactory

from .harness import HarnessBase, write_source


@pytest.fixture
def config(make_config: ConfigFactory, tmp_path: Path) -> Config:
    pointer = tmp_path / "runner" / "session"
    pointer.parent.mkdir()
    pointer.write_text(SESSION + "\n")
    return make_config(
        activation="pointer", resume_pointer_path=str(pointer),
        stability_interval_seconds=0.01, stability_timeout_seconds=3.0,
        health_window_seconds=0.05, health_timeout_seconds=0.4, poll_interval_seconds=0.01)


@pytest.fixture
def source(config: Config) -> Path:
    return write_source(config)


@pytest.fixture
def base(config: Config, tmp_path: Path) -> HarnessBase:
    return HarnessBase(config, tmp_path / "base-control")


@pytest.fixture
def store(config: Config) -> OperationStore:
    return OperationStore(config.state_dir)
