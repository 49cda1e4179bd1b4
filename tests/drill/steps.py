"""The two halves of a live drill, shared by the host drill and the container drill: the model
asks for a rebuild and the pane moves to the new session; a rollback takes it back."""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable
from pathlib import Path

import orjson

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.operations.worker import run_operation
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.support.claude_env import find_claude_binary
from tests.support.fidelity import conversation_texts, non_text_block_types

from . import live, procs

S = OperationStatus
#: What Claude Code itself appends to a transcript when its process is ended.
EXIT_RECORDS = {"last-prompt", "cost-state"}


def _record_types(data: bytes) -> set[str]:
    return {orjson.loads(line)["type"] for line in data.splitlines() if line.strip()}


def assert_old_transcript_kept(op: Operation, old_path: Path) -> None:
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


def rebuild_through_mcp(drill: live.Stage, pane_id: str, old_pid: int, old: str) -> Operation:
    """The model calls our request tool; after the Stop the daemon switches the pane; the next
    request carries the old speech verbatim and no runtime block."""
    drill.turn(live.P_REBUILD, live.A_REBUILD_DONE)
    op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

    assert op.status is S.activated, op.error
    assert op.requested_by == "mcp" and op.source_session_id == old
    new = op.new_session_id
    assert new is not None and new != old
    assert_old_transcript_kept(op, drill.env.session_path(old))
    assert drill.pane()[0] == pane_id
    new_pid = drill.pane()[1]
    assert new_pid != old_pid
    assert op.identity_before is not None and op.identity_after is not None
    # The identity names the Claude Code process itself (the pane runs it directly here); from
    # the container also the program in the pane's foreground.
    before, after = dict(op.identity_before.token), dict(op.identity_after.token)
    assert before.pop("pane_command", "claude") == after.pop("pane_command", "claude") == "claude"
    assert before == {"pane_id": pane_id, "pane_pid": str(old_pid), "claude_pid": str(old_pid),
                      "claude_start": before["claude_start"]}
    assert before["claude_start"].isdigit()
    assert after == {"pane_id": pane_id, "pane_pid": str(new_pid), "claude_pid": str(new_pid),
                     "claude_start": registry.proc_start(new_pid) or "?"}
    assert op.resume_argv is not None and op.resume_argv[-2:] == ["--resume", new]

    drill.wait_ready(new)
    drill.turn(live.P_AFTER, live.A_AFTER)
    (body,) = drill.requests_with(live.P_AFTER)
    assert conversation_texts(body) == [*live.OLD_SPEECH, ("user", live.P_AFTER)]
    assert non_text_block_types(body) == set()
    return op


def rollback_on_request(drill: live.Stage, op: Operation, pane_id: str, old: str) -> Operation:
    """A rollback asked on the command line runs at the next Stop: the pane runs the old
    session again, whose history still holds its tool blocks."""
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
    return op


def refused_bare_program(drill: live.Stage, pane_path: str) -> Operation:
    """A rebuild whose `resume_command` names a bare `claude` that the PATH tmux gives the pane
    (PANE_PATH) does not find is refused at prepare: nothing written, the pane untouched, and the
    old session goes on answering in the same process."""
    drill.household_pane()  # the pane is its server's last: it must not close
    request_after_a_turn(drill, "drill: bare program")
    old = drill.registry_session()
    pane = drill.pane()

    op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=90)

    assert op.status is S.failed, op.error
    assert op.error == ("resume_command cannot be started: the program 'claude' of "
                        "resume_command is not found on the tmux server's host on the PATH a "
                        f"respawned pane gets ({pane_path}, the tmux environment's)")
    assert op.resume_argv is None and op.backup_path is None
    assert drill.pane() == pane
    assert sorted(p.stem for p in drill.env.project_dir.glob("*.jsonl")) == [old]
    assert not list(drill.env.project_dir.glob("*.manifest.json"))
    drill.turn(live.P_OLD, live.A_OLD)
    assert drill.pane() == pane
    return op


def request_after_a_turn(drill: live.Stage, reason: str) -> None:
    """A turn, a rebuild request on the command line, and the turn whose Stop schedules it.
    (Claude Code writes a new session's transcript file some time after its first turn, at
    times only after that turn's Stop hook ran: the request waits for the second turn.)"""
    drill.turn(live.P_THINK, live.A_THINK)
    asked = drill.cli("request", "--reason", reason, "--confirm", "REBUILD")
    assert asked.returncode == 0, asked.stderr
    drill.turn(live.P_AFTER, live.A_AFTER)


def program_missing_at_the_start(program: Path) -> Callable[[str], None]:
    """A worker step hook: PROGRAM (a link to Claude Code) is gone when the switch starts the
    target (as when an update replaces it at that moment, after the start check passed), and
    back by the time the switch back starts it again."""
    def on_step(step: str) -> None:
        if step == "switch":
            program.unlink()
        if step == "switch_back":
            program.symlink_to(find_claude_binary())
    return on_step


def run_with_program_missing(drill: live.Stage, program: Path) -> tuple[Operation, str, str, int]:
    """The worker runs the scheduled operation with PROGRAM missing at the start
    (`program_missing_at_the_start`); it falls back. Returns the operation, the session that ran
    before, and the pane's id and pid before."""
    session = drill.registry_session()
    op = procs.latest(drill.config)
    assert session is not None and op is not None and op.status is S.scheduled, op
    pane_id, old_pid = drill.pane()
    op = run_operation(drill.config, OperationStore(drill.config.state_dir),
                       TmuxBase(drill.config), op.operation_id,
                       on_step=program_missing_at_the_start(program))
    assert op.status is S.rolled_back and op.rollback_ok is True, op.error
    return op, session, pane_id, old_pid
