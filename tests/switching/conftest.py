from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.switching.sandbox import PrivateTmux


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[PrivateTmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    home = tmp_path / "home"
    home.mkdir()
    with PrivateTmux(home) as server:
        yield server


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
