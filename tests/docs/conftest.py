"""Fixtures of the docs tests: an instance config of the test's own on a real Claude Code
transcript, the way a household's config names its session."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kael_thread_rebuild.config import parse_config
from tests.guard import assert_safe_target
from tests.installer.conftest import run_module  # noqa: F401 (a fixture of these tests too)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "claude-code-2.1.328" / "long-tool-output.jsonl"


@pytest.fixture
def instance_config(tmp_path: Path) -> Path:
    """A config file whose project dir holds a transcript the real Claude Code wrote."""
    project = tmp_path / "claude" / "projects" / "-home-user-companion"
    project.mkdir(parents=True)
    shutil.copyfile(FIXTURE, project / FIXTURE.name)
    data = {
        "instance": "docs",
        "project_dir": str(project),
        "claude_config_dir": str(tmp_path / "claude"),
        "state_dir": str(tmp_path / "state"),
        "tmux_target": "DO-NOT-CREATE-docs:0.0",
        "tmux_socket": f"kael-test-docs-{tmp_path.name}",
    }
    assert_safe_target(parse_config(data))
    path = tmp_path / "companion.toml"
    path.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in data.items()))
    return path
