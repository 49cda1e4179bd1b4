"""The real Kimi Code CLI for the advisor's tests: a state of its own against the loopback
provider stand-in, and the environment that points the advisor (runner, server) at both."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.kimi_env import KimiEnv, find_kimi_binary, kimi_available, make_kimi_env
from tests.support.standin_openai import StandinOpenAI

needs_kimi = pytest.mark.skipif(not kimi_available(), reason="the Kimi Code CLI is not "
                                "installed (.ci/setup installs it under .tools/)")


@dataclass
class Advised:
    api: StandinOpenAI
    kimi: KimiEnv
    project: Path
    sessions: Path

    def env(self) -> dict[str, str]:
        """What the advisor's processes need on top of the caller's environment."""
        return {"KAEL_ADVISOR_KIMI": str(find_kimi_binary()),
                "KIMI_CODE_HOME": str(self.kimi.kimi_home), "HOME": str(self.kimi.home),
                "KAEL_ADVISOR_SESSIONS": str(self.sessions), "KAEL_ADVISOR_IDLE_SECONDS": "20",
                "TMPDIR": str(self.kimi.root / "tmp")}


@pytest.fixture
def advised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Advised]:
    with StandinOpenAI() as api:
        kimi = make_kimi_env(tmp_path, api.url)
        found = Advised(api, kimi, kimi.cwd, tmp_path / "sessions")
        for key, value in found.env().items():
            monkeypatch.setenv(key, value)
        yield found
