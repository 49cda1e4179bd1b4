"""The live drill: the real Claude Code, interactive in a tmux pane, asks for a rebuild through our
MCP tool; its Stop hook schedules it; the daemon switches the pane to the rebuilt session; a
rollback takes it back. A refusal through the same path when the pane is replaced meanwhile.
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import orjson
import pytest

from kael_thread_rebuild.operations.model import Operation, OperationStatus
from tests.support.claude_env import claude_available, tmux_available
from tests.support.fidelity import conversation_texts, non_text_block_types
from tests.switching.sandbox import SLEEPER, wait_until

from . import live, procs

S = OperationStatus
pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not tmux_available(), reason="tmux is not installed"),
]
#: What Claude Code itself appends to a transcript when its process is ended.
EXIT_RECORDS = {"last-prompt", "cost-state"}


def _record_types(data: bytes) -> set[str]:
    return {orjson.loads(line)["type"] for line in data.splitlines() if line.strip()}


def _assert_old_transcript_kept(op: Operation, old_path: Path) -> None:
    """The backup is 0600 and byte-identical to the source as prepared, and the old transcript
    still starts with exactly those bytes: the engine never wrote it. (Claude Code appends its
    exit bookkeeping when the switch ends the old process.)"""
    backup = Path(op.backup_path or "")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    kept = backup.read_bytes()
    assert hashlib.sha256(kept).hexdigest() == op.source_sha256
    now = old_path.read_bytes()
    assert now[:len(kept)] == kept
    assert _record_types(now[len(kept):]) <= EXIT_RECORDS


def test_the_model_requests_a_rebuild_and_the_pane_switches_then_rolls_back(
        tmp_path: Path) -> None:
    with live.stage(tmp_path) as drill:
        pane_id, old_pid = drill.pane()
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_THINK, live.A_THINK)
        assert drill.tool_listed(live.REQUEST_TOOL), "our MCP server never reached Claude Code"
        old = drill.registry_session()
        assert old is not None
        old_path = drill.env.session_path(old)

        drill.turn(live.P_REBUILD, live.A_REBUILD_DONE)
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

        assert op.status is S.activated, op.error
        assert op.requested_by == "mcp" and op.source_session_id == old
        new = op.new_session_id
        assert new is not None and new != old
        _assert_old_transcript_kept(op, old_path)
        assert drill.pane()[0] == pane_id
        new_pid = drill.pane()[1]
        assert new_pid != old_pid
        assert op.identity_before is not None and op.identity_after is not None
        assert op.identity_before.token == {"pane_id": pane_id, "pane_pid": str(old_pid)}
        assert op.identity_after.token == {"pane_id": pane_id, "pane_pid": str(new_pid)}
        assert op.resume_argv is not None and op.resume_argv[-2:] == ["--resume", new]

        drill.wait_ready(new)
        drill.turn(live.P_AFTER, live.A_AFTER)
        (body,) = drill.requests_with(live.P_AFTER)
        assert conversation_texts(body) == [*live.OLD_SPEECH, ("user", live.P_AFTER)]
        assert non_text_block_types(body) == set()

        asked = drill.cli("rollback", "--operation", op.operation_id, "--confirm", "ROLLBACK")
        assert asked.returncode == 0, asked.stderr
        assert "rollback_pending" in asked.stdout
        drill.turn(live.P_BACK, live.A_BACK)
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

        assert op.status is S.rolled_back and op.rollback_ok is True, op.error
        assert op.rollback_argv is not None and op.rollback_argv[-2:] == ["--resume", old]
        drill.wait_ready(old)
        assert drill.pane()[0] == pane_id
        drill.turn(live.P_OLD, live.A_OLD)
        (body,) = drill.requests_with(live.P_OLD)
        assert conversation_texts(body) == [*live.OLD_SPEECH, ("user", live.P_OLD)]
        assert {"tool_use", "tool_result", "thinking"} <= non_text_block_types(body)

        worker_log = procs.log_lines(drill.config, "worker.log")
        name = op.operation_id
        assert f"operation {name}: activating -> activated (the new session is healthy)" \
            in worker_log
        assert f"operation {name}: rollback_scheduled -> rolled_back (rolled back on request)" \
            in worker_log
        assert procs.log_lines(drill.config, "hook.log") == [
            f"hook-stop: operation {name} -> scheduled",
            f"hook-stop: operation {name} -> rollback_scheduled"]
    assert (tmp_path / "daemon.stderr").read_text() == ""


def test_a_pane_replaced_between_stop_and_activation_is_refused(tmp_path: Path) -> None:
    # Slow stability samples keep the operation in prepare long enough to replace the pane.
    with live.stage(tmp_path, stability_interval_seconds=2.0) as drill:
        asked = drill.cli("request", "--reason", "drill refusal", "--confirm", "REBUILD")
        assert asked.returncode == 0, asked.stderr
        drill.turn(live.P_THINK, live.A_THINK)
        old = drill.registry_session()

        def preparing() -> Operation | None:
            op = procs.latest(drill.config)
            return op if op is not None and op.identity_before is not None else None

        assert wait_until(preparing, timeout=30, what="the worker to read the target's "
                          "identity").status is S.running
        procs.tmux(drill.tui.socket, "respawn-pane", "-k", "-t", drill.tui.target, *SLEEPER)
        replaced = drill.pane()

        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

        assert op.status is S.failed and op.session_conflict, op.error
        assert "the target changed since prepare" in op.error
        assert op.resume_argv is None and op.identity_after is None
        assert drill.pane() == replaced
        transcripts = sorted(p.stem for p in drill.env.project_dir.glob("*.jsonl"))
        assert transcripts == [old]
        assert not list(drill.env.project_dir.glob("*.manifest.json"))
