"""The health check after a switch, against a real tmux pane: the new Claude Code is watched for
the whole health window, even once its registry says its session is up (`status` idle), so that
one that dies right after its start is still rolled back.

A stand-in plays Claude Code's start-up as 2.1.328 records it in its session registry: the entry
first without a `status`, then, once its prompt waits, with `status: idle`.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from kael_thread_rebuild.operations.switchover import health_problem
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.switching.sandbox import SLEEPER, PrivateTmux, tmux_config

#: `<this> SESSION REGISTRY STATUS`: registers SESSION without a status, then after 0.3 s with
#: STATUS ("-": never), and stays up.
STARTING_CLAUDE = """import json, os, pathlib, sys, time
stat = pathlib.Path("/proc/self/stat").read_text().rpartition(")")[2].split()
entry = {"pid": os.getpid(), "sessionId": sys.argv[1], "procStart": stat[19]}
registry = pathlib.Path(sys.argv[2])
registry.mkdir(parents=True, exist_ok=True)
def write():
    temp = registry / f".{os.getpid()}.tmp"
    temp.write_text(json.dumps(entry))
    temp.rename(registry / f"{os.getpid()}.json")
write()
time.sleep(0.3)
if sys.argv[3] != "-":
    entry["status"] = sys.argv[3]
    write()
time.sleep(600)"""


def _health_seconds(tmux: PrivateTmux, tmp_path: Path, workdir: Path, status: str,
                    window: float) -> tuple[str, float]:
    target = tmux.new_session(SLEEPER, cwd=workdir, remain_on_exit=False)
    registry = tmp_path / "claude-config" / "sessions"
    config = tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                         claude_config_dir=tmp_path / "claude-config",
                         resume_command=[sys.executable, "-c", STARTING_CLAUDE, "{session_id}",
                                         str(registry), status],
                         health_window_seconds=window, health_timeout_seconds=window + 10)
    base = TmuxBase(config)
    session = str(uuid.uuid4())
    started = time.monotonic()
    base.switch_to(session)
    problem = health_problem(base, session, config, must_report=True)
    return problem, time.monotonic() - started


def test_a_session_that_says_it_is_up_is_still_watched_for_the_whole_window(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    problem, seconds = _health_seconds(tmux, tmp_path, workdir, "idle", window=2.0)
    assert problem == ""
    assert seconds >= 2.0


def test_a_session_still_starting_waits_out_the_window(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    # It reports the new session from its first write, but never says it is up.
    problem, seconds = _health_seconds(tmux, tmp_path, workdir, "-", window=2.0)
    assert problem == ""
    assert seconds >= 2.0


def test_a_status_that_is_not_a_ready_one_waits_out_the_window(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    problem, seconds = _health_seconds(tmux, tmp_path, workdir, "starting", window=2.0)
    assert problem == ""
    assert seconds >= 2.0
