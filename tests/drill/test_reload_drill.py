"""Reload, live: the real Claude Code is restarted onto the session it runs, through the switch's
machinery (the Stop, the identity checks, the health check, the fallback), so that an MCP server
registered after it started is loaded, and no word is lost. The tmux base with our MCP server
registered while Claude Code runs (as the installer does), its fallback when the resumed process
does not come up, and the pointer base with the reference runner.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import orjson
import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.mcp_live import check_mcp_loaded
from kael_thread_rebuild.doctor.model import Check
from kael_thread_rebuild.doctor.runner import run_doctor
from kael_thread_rebuild.operations.model import Operation, OperationKind, OperationStatus
from tests.support.claude_env import claude_available, find_claude_binary, tmux_available
from tests.support.fidelity import conversation_texts
from tests.support.standin_api import Reply, StandinAPI, Text, prompt_script

from . import live, procs, steps
from .test_pointer_drill import A_FIRST, A_SECOND, P_FIRST, P_SECOND, _pointer_instance

S = OperationStatus
pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
]
needs_tmux = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")


def mcp_loaded(config: Config) -> Check:
    return run_doctor(config, checks=[check_mcp_loaded]).checks[0]


def kept_every_line(path: Path, op: Operation) -> bool:
    """Whether PATH still starts with the transcript as it was when the reload ran (its size and
    digest are in the record)."""
    data = path.read_bytes()
    size = op.source_size or 0
    return size > 0 and hashlib.sha256(data[:size]).hexdigest() == op.source_sha256


def request_reload(drill: live.Stage) -> None:
    asked = drill.cli("reload", "--confirm", "RELOAD")
    assert asked.returncode == 0, asked.stderr
    assert "reload requested" in asked.stdout


@needs_tmux
def test_a_reload_loads_a_server_registered_while_claude_code_ran_and_keeps_every_word(
        tmp_path: Path) -> None:
    with live.stage(tmp_path, mcp_at_start=False) as drill:
        drill.turn(live.P_THINK, live.A_THINK)
        session = drill.registry_session()
        assert session is not None
        drill.register_mcp()
        before = mcp_loaded(drill.config)
        assert before.warning and "does not run the MCP server" in before.detail, before
        pane_id, old_pid = drill.pane()

        request_reload(drill)
        drill.turn(live.P_AFTER, live.A_AFTER)  # its Stop lets the reload run
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=120)

        assert op.status is S.activated, op.error
        assert op.kind is OperationKind.reload
        assert op.source_session_id == op.new_session_id == session
        assert op.resume_argv == [str(find_claude_binary()), "--resume", session]
        assert op.candidate_path is None and op.backup_path is None
        drill.wait_ready(session)
        assert drill.pane()[0] == pane_id and drill.pane()[1] != old_pid
        transcript = drill.env.session_path(session)
        assert kept_every_line(transcript, op)
        assert sorted(p.stem for p in drill.env.project_dir.glob("*.jsonl")) == [session]
        drill.wait_mcp_ready()
        after = mcp_loaded(drill.config)
        assert after.ok and not after.warning and not after.skipped, after

        drill.turn(live.P_OLD, live.A_OLD)
        body = drill.requests_with(live.P_OLD)[-1]
        assert conversation_texts(body) == [("user", live.P_THINK), ("assistant", live.A_THINK),
                                            ("user", live.P_AFTER), ("assistant", live.A_AFTER),
                                            ("user", live.P_OLD)]
        assert live.REQUEST_TOOL in orjson.dumps(body).decode()  # the server's tools, told
        assert f"operation {op.operation_id}: activating -> activated (the reloaded session " \
               "is healthy)" in procs.log_lines(drill.config, "worker.log")
    assert (tmp_path / "daemon.stderr").read_text() == ""


@needs_tmux
def test_a_reload_whose_start_fails_resumes_the_session_again(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.symlink_to(find_claude_binary())
    with live.stage(tmp_path, daemon=False, health_timeout_seconds=90.0,
                    resume_command=[str(program), "--resume", "{session_id}"]) as drill:
        drill.household_pane()
        request_reload(drill)
        drill.turn(live.P_THINK, live.A_THINK)
        op, session, pane_id, old_pid = steps.run_with_program_missing(drill, program)
        assert op.error == (f"the target is not alive after switching to session {session}; "
                            "the old session was resumed")
        assert op.rollback_argv == [str(program), "--resume", session]
        drill.wait_ready(session)
        assert drill.pane()[0] == pane_id and drill.pane()[1] != old_pid
        assert kept_every_line(drill.env.session_path(session), op)
        drill.turn(live.P_OLD, live.A_OLD)
        body = drill.requests_with(live.P_OLD)[-1]
        assert ("user", live.P_THINK) in conversation_texts(body)


def test_a_reload_on_the_pointer_base_resumes_the_same_session(tmp_path: Path) -> None:
    responder = prompt_script({P_FIRST: [Reply([Text(A_FIRST)])],
                               P_SECOND: [Reply([Text(A_SECOND)])]})
    with StandinAPI(responder) as api:
        place = _pointer_instance(tmp_path, api.url)
        with procs.daemon(place.config_path, tmp_path / "daemon.stderr"):
            asked = procs.run_cli(place.config_path, "reload", "--confirm", "RELOAD")
            assert asked.returncode == 0, asked.stderr
            env = {**place.claude.env, "CLAUDE_BIN": str(find_claude_binary()),
                   "KAEL_CMD": f"{procs.CLI} --config {place.config_path}",
                   "KAEL_WAIT_TIMEOUT": "60"}
            ran = subprocess.run(["bash", str(place.runner), str(place.pointer)], env=env,
                                 cwd=place.claude.cwd, input=f"{P_FIRST}\n{P_SECOND}\n",
                                 capture_output=True, text=True, timeout=180, check=False)
        bodies = api.message_bodies()

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [A_FIRST, A_SECOND]
    op = procs.latest(place.config)
    assert op is not None and op.status is S.activated and op.kind is OperationKind.reload, op
    session = op.source_session_id
    assert session is not None and op.new_session_id == session
    assert place.pointer.read_text() == f"{session}\n"
    assert conversation_texts(bodies[-1]) == [("user", P_FIRST), ("assistant", A_FIRST),
                                              ("user", P_SECOND)]
    assert kept_every_line(place.claude.session_path(session), op)
    assert sorted(p.stem for p in place.claude.project_dir.glob("*.jsonl")) == [session]
