"""Fixtures of the tests that run the real Claude Code and the real Kimi Code CLI through the
advisor, each against its loopback stand-in (`tests/support/advisor_claude.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.advisor_claude import AdvisorPlace, advisor_script, make_advisor_place
from tests.support.standin_api import StandinAPI
from tests.support.standin_openai import StandinOpenAI

#: `claude -p` cannot ask: the advisor's tools are all allowed there.
ALLOW_ALL = {"allow": ["mcp__advisor-mcp"]}


@pytest.fixture
def claude_api() -> Iterator[StandinAPI]:
    with StandinAPI(advisor_script) as api:
        yield api


@pytest.fixture
def kimi_api() -> Iterator[StandinOpenAI]:
    with StandinOpenAI() as api:
        yield api


@pytest.fixture
def place(tmp_path: Path, claude_api: StandinAPI, kimi_api: StandinOpenAI) -> AdvisorPlace:
    return make_advisor_place(tmp_path, claude_api.url, kimi_api.url, permissions=ALLOW_ALL)
