"""The switch's start check from the daemon container, as the household of the incident had it:
`resume_command` names a bare `claude` that only the user's login shell finds. The container's
tmux client would hand the respawned pane the container's PATH, the command would not be found
and the pane, the last of its tmux server, would close with the server. The daemon refuses
instead, with nothing touched, and the old session goes on answering in the same pane.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.drill import steps
from tests.support.claude_env import claude_available, tmux_available

from . import engine
from .test_container_drill import container_stage

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not tmux_available(), reason="tmux is not installed"),
]


def test_the_daemon_container_refuses_a_program_the_pane_would_not_find(
        tmp_path: Path, appliance: engine.Instance) -> None:
    login_path = os.environ["PATH"]  # the tmux server's, so every new pane's
    if shutil.which("claude", path=login_path):
        pytest.skip("a `claude` on this machine's PATH would be found by the pane")
    with container_stage(tmp_path, appliance,
                         resume_command=["claude", "--resume", "{session_id}"]) as drill:
        steps.refused_bare_program(drill, login_path)
