"""The real Kimi Code CLI for the advisor's tests: a state of its own against the loopback
provider stand-in, the environment that points the advisor (runner, server) at both, and a Glob
and a Grep for the stand-in model to ask for."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.kimi_env import KimiEnv, find_kimi_binary, kimi_available, make_kimi_env
from tests.support.standin_openai import StandinOpenAI, ToolCall

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


def project_searches(project: Path) -> list[ToolCall]:
    """Writes a Python file that holds the word and a text file that does not into PROJECT; the
    tool calls of a Glob for Python files and a Grep for the word. Kimi runs both with ripgrep."""
    (project / "src").mkdir()
    (project / "src" / "plum.py").write_text("WORD = 'PLUM'\n")
    (project / "notes.txt").write_text("nothing to see\n")
    return [ToolCall("Glob", {"pattern": "**/*.py"}),
            ToolCall("Grep", {"pattern": "WORD =", "output_mode": "content"})]


def assert_searches_found(results: list[str]) -> None:
    """RESULTS, the tool messages after :func:`project_searches`, found the file and the line."""
    assert len(results) == 2, results
    globbed, grepped = results
    assert "src/plum.py" in globbed and "notes.txt" not in globbed, globbed
    assert "plum.py" in grepped and "WORD = 'PLUM'" in grepped, grepped
