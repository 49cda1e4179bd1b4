"""The switch from the daemon container, as the household of the incident had it. The start check:
`resume_command` names a bare `claude` that only the user's login shell finds. The container's
tmux client would hand the respawned pane the container's PATH, the command would not be found
and the pane, the last of its tmux server, would close with the server. The daemon refuses
instead, with nothing touched, and the old session goes on answering in the same pane. And a
switch that goes ahead gives the new process the tmux environment's PATH, not the container's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kael_thread_rebuild.operations.model import OperationStatus
from tests.drill import procs, steps
from tests.support.claude_env import claude_available, tmux_available
from tests.switching.sandbox import environ

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


def test_the_pane_switched_from_the_daemon_container_gets_the_tmux_path(
        tmp_path: Path, appliance: engine.Instance) -> None:
    login_path = os.environ["PATH"]  # the tmux server's: what any new pane of it gets
    with container_stage(tmp_path, appliance) as drill:
        old_pid = drill.pane()[1]
        steps.request_after_a_turn(drill, "drill: the pane's PATH")

        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=90)

        assert op.status is OperationStatus.activated, op.error
        new_pid = drill.pane()[1]
        assert new_pid != old_pid
        assert environ(new_pid)["PATH"] == login_path  # not the container's
        assert op.identity_before is not None and op.identity_after is not None
        assert op.identity_before.token["pane_command"] == "claude"  # seen from the container
        assert op.identity_after.token["pane_command"] == "claude"
