"""The tmux base against the real Claude Code binary, interactive in a pane on a private socket."""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.support.claude_env import (
    ClaudeEnv,
    claude_available,
    find_claude_binary,
    make_claude_env,
)
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import PrivateTmux, tmux_config, wait_until, write_minimal_session

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
]


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[ClaudeEnv]:
    with StandinAPI() as api:
        yield make_claude_env(tmp_path / "claude", api.url)


def _config(tmux: PrivateTmux, target: str, tmp_path: Path, claude: ClaudeEnv) -> Config:
    return tmux_config(tmux, target, tmp_path, project_dir=claude.project_dir,
                       claude_workdir=claude.cwd, claude_config_dir=claude.config_dir,
                       resume_command=[str(find_claude_binary()), "--resume", "{session_id}"])


def test_registry_names_the_session_before_and_after_a_respawn(
        tmux: PrivateTmux, tmp_path: Path, claude: ClaudeEnv) -> None:
    # Claude Code's own environment lives in the tmux *session* environment, as a household's
    # should, and the pane runs it under a shell: both must survive the respawn.
    start = [str(find_claude_binary())]
    target = tmux.new_session(["sh", "-c", shlex.join(start) + "; true"], cwd=claude.cwd,
                              env=claude.env)
    base = TmuxBase(_config(tmux, target, tmp_path, claude))

    first = wait_until(base.running_session, timeout=60, what="claude to register")
    before = base.identity()
    assert before.running_session_id == first
    entry = registry.entry_for_tree(claude.config_dir, int(before.token["pane_pid"]))
    assert entry is not None and entry.pid != int(before.token["pane_pid"])  # under the shell
    assert entry.pid_domain == registry.pid_domain()
    assert entry.tmux_pane_id == before.token["pane_id"]
    assert entry.cwd == str(claude.cwd)

    rebuilt = str(uuid.uuid4())
    write_minimal_session(claude.project_dir, rebuilt)
    base.switch_to(rebuilt)

    wait_until(lambda: base.running_session() == rebuilt, timeout=60,
               what="claude to register the resumed session")
    after = base.identity()
    assert after.token["pane_id"] == before.token["pane_id"]
    assert after.token["pane_pid"] != before.token["pane_pid"]
    assert after.running_session_id == rebuilt
    assert base.alive()
    old_file = registry.registry_dir(claude.config_dir) / f"{entry.pid}.json"
    wait_until(lambda: not old_file.exists(), timeout=10, what="the old entry to go away")
    wait_until(lambda: "7391" in tmux.capture(target), timeout=30,
               what="the resumed history on screen")
