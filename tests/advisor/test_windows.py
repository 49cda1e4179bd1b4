"""The window lookup: the hook's files on this project (or an ancestor or descendant of it),
the newest by mtime; garbage and other projects are ignored."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kael_advisor.errors import AdvisorError
from kael_advisor.windows import current_conversation, windows
from tests.advisor.advisor_env import write_window

PROJECT = Path("/home/u/project")


def test_the_newest_window_on_the_project_wins(tmp_path: Path) -> None:
    now = time.time()
    write_window(tmp_path, "old-window", PROJECT, now - 100)
    write_window(tmp_path, "new-window", PROJECT, now - 10)
    write_window(tmp_path, "elsewhere", Path("/home/u/other"), now)

    assert current_conversation(PROJECT, tmp_path) == "new-window"
    assert [w.session_id for w in windows(PROJECT, tmp_path)] == ["new-window", "old-window"]


@pytest.mark.parametrize("cwd", ["/home/u/project/build/sub", "/home/u", "/home/u/project"])
def test_ancestors_and_descendants_count(tmp_path: Path, cwd: str) -> None:
    write_window(tmp_path, "mine", Path(cwd))

    assert current_conversation(PROJECT, tmp_path) == "mine"


@pytest.mark.parametrize("cwd", ["/home/u/project-2", "/home/u/other/project", "relative"])
def test_other_projects_do_not(tmp_path: Path, cwd: str) -> None:
    write_window(tmp_path, "theirs", Path(cwd))

    with pytest.raises(AdvisorError, match="no Claude Code conversation found"):
        current_conversation(PROJECT, tmp_path)


def test_garbage_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text('["list"]')
    (tmp_path / "c.json").write_text('{"session_id": 3, "cwd": "/home/u/project"}')
    (tmp_path / "d.json").write_text("[" * 100_000)
    write_window(tmp_path, "real", PROJECT, time.time() - 1000)

    assert current_conversation(PROJECT, tmp_path) == "real"


def test_no_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AdvisorError) as caught:
        current_conversation(PROJECT, tmp_path / "missing")

    assert "\n" not in str(caught.value) and "kael-advisor-hook" in str(caught.value)
