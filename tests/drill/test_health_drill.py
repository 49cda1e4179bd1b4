"""Health failure through the real command line, the daemon and a real tmux pane: the rebuilt
session's command exits at once, so the old session is resumed in the same pane (`rolled_back`).

A stand-in plays Claude Code: it registers in the session registry as Claude Code does (the
worker switches only a target that runs the Claude Code process of the Stop's session), stays up
for the old session id and exits at once for any other.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest

from kael_thread_rebuild.operations.model import OperationStatus
from tests.builder import SESSION
from tests.operations.harness import write_source
from tests.switching.sandbox import PrivateTmux, cmdline

from . import procs

S = OperationStatus
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

#: `<this> SESSION OLD REGISTRY`: registers SESSION in REGISTRY and runs while SESSION is OLD,
#: exits 3 at once otherwise.
FAKE_CLAUDE = """import json, os, pathlib, sys, time
if sys.argv[1] != sys.argv[2]:
    sys.exit(3)
stat = pathlib.Path("/proc/self/stat").read_text().rpartition(")")[2].split()
entry = {"pid": os.getpid(), "sessionId": sys.argv[1], "procStart": stat[19]}
registry = pathlib.Path(sys.argv[3])
registry.mkdir(parents=True, exist_ok=True)
(registry / f"{os.getpid()}.json").write_text(json.dumps(entry))
time.sleep(600)"""


def fake_claude(session: str, config_dir: Path) -> list[str]:
    return [sys.executable, "-c", FAKE_CLAUDE, session, SESSION, str(config_dir / "sessions")]


def test_a_new_session_that_exits_at_once_is_replaced_by_the_old_one(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    with PrivateTmux(home) as tmux:
        claude_config = tmp_path / "claude-config"
        # remain-on-exit off, as in a household: the engine keeps the pane through the switch.
        target = tmux.new_session(fake_claude(SESSION, claude_config), cwd=work,
                                  remain_on_exit=False)
        config_path = tmp_path / "kael.toml"
        config = procs.write_config(config_path, {
            "project_dir": tmp_path / "project", "state_dir": tmp_path / "state",
            "claude_workdir": work, "claude_config_dir": claude_config,
            "activation": "tmux", "tmux_socket": tmux.socket, "tmux_target": target,
            "resume_command": fake_claude("{session_id}", claude_config),
            "stability_interval_seconds": 0.05, "health_window_seconds": 0.5,
            "health_timeout_seconds": 3.0, "poll_interval_seconds": 0.05})
        config.project_dir.mkdir()
        source = write_source(config)
        source_bytes = source.read_bytes()
        pane_id, old_pid = procs.pane(tmux.socket, target)
        stop = orjson.dumps({"session_id": SESSION, "transcript_path": str(source),
                             "hook_event_name": "Stop"})

        with procs.daemon(config_path, tmp_path / "daemon.stderr"):
            asked = procs.run_cli(config_path, "request", "--reason", "drill", "--confirm",
                                  "REBUILD", "--json")
            assert asked.returncode == 0, asked.stderr
            name = orjson.loads(asked.stdout)["operation"]["operation_id"]
            hook = procs.run_cli(config_path, "hook-stop", stdin=stop)
            assert (hook.returncode, hook.stdout) == (0, "")
            waited = procs.run_cli(config_path, "wait", "--operation", name, "--timeout", "30")

        assert waited.returncode == 1, waited.stderr  # the rebuild did not take
        assert f"operation {name}: rolled_back" in waited.stdout
        op = procs.latest(config)
        assert op is not None and op.status is S.rolled_back and op.rollback_ok is True
        new = op.new_session_id
        assert new is not None
        assert op.error == (f"the target is not alive after switching to session {new}; "
                            "the old session was resumed")
        assert op.resume_argv == fake_claude(new, claude_config)
        assert op.rollback_argv == fake_claude(SESSION, claude_config)
        now_id, now_pid = procs.pane(tmux.socket, target)
        assert now_id == pane_id and now_pid != old_pid
        assert cmdline(now_pid) == fake_claude(SESSION, claude_config)
        assert source.read_bytes() == source_bytes
        assert [line.split(": ", 1)[1] for line in procs.log_lines(config, "worker.log")
                if line.startswith(f"operation {name}")] == [
            "scheduled -> running (worker started)",
            "running -> verifying (candidate written)",
            "verifying -> activating (checks passed)",
            "activating -> rolled_back (returned to the old session): the target is not alive "
            f"after switching to session {new}; the old session was resumed"]
