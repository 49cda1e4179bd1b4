"""The table of actions: every command of the engine, declared once.

`cli` builds its subcommands from `ACTIONS`, `mcp_tools` its tools (with their annotations), and
the installer's permission list is the collection's `kael_mcp_tools.py`, written from it by
`python -m kael_thread_rebuild.interfaces.actions --write-role-tools PATH` (Ansible runs that
file on the household with the standard library only); tests/test_actions.py checks that all
three agree with the table.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from ..doctor.model import DoctorReport
from ..errors import Refused, UsageError
from ..fsutil import atomic_write_bytes
from ..operations import service
from ..operations.model import IN_FLIGHT, Operation
from ..operations.service import (
    CANCEL_WORD,
    REBUILD_WORD,
    RELOAD_WORD,
    ROLLBACK_WORD,
    Confirmed,
    Requested,
)
from ..operations.stop_hook import record_stop_input
from ..operations.store import Recovery
from ..paths import require_path_text, resolve_transcript, shown
from ..plan import build_plan
from ..state_layout import HOOK_LOG, OPERATIONS, WORKER_LOG
from . import formatters as show
from .action_inputs import (
    CancelInput,
    CandidateInput,
    ConfirmInput,
    NoInput,
    PiecesInput,
    ReloadInput,
    RequestInput,
    RollbackInput,
    ServeInput,
    StartFailedInput,
    StatusInput,
    WaitInput,
)
from .action_model import Action, Call, Nothing, Tool
from .claude_pieces import ClaudePieces, Wiring, config_path, pieces, words
from .outcomes import (
    CandidateSummary,
    Found,
    History,
    OperationResult,
    StartFailed,
    StatusResult,
    Waited,
)
from .reading import DIRTY, PLAN

MAX_WAIT_SECONDS = 7 * 86400.0

# -- the service functions -----------------------------------------------------------------------


def _candidate(call: Call, given: CandidateInput) -> CandidateSummary:
    try:
        require_path_text(str(given.output_dir))
        output_dir = given.output_dir.expanduser().absolute()
    except (ValueError, RuntimeError) as exc:  # RuntimeError: `~user` of no one
        raise UsageError(f"--output-dir {shown(given.output_dir)} {exc}") from None
    if not output_dir.is_dir():
        raise UsageError(f"--output-dir {output_dir} does not exist or is not a directory")
    from ..candidate.writer import write_candidate  # only this action writes

    plan = build_plan(call.config, resolve_transcript(call.config, given.transcript),
                      started=call.started)
    if plan.blocked:
        raise Refused(f"plan blocked: {plan.report.blocked_reason}")
    result = write_candidate(plan, output_dir, call.config)
    counts = plan.report.model_dump(include=set(CandidateSummary.model_fields))
    return CandidateSummary(
        new_session_id=result.new_session_id, candidate_path=str(result.candidate_path),
        manifest_path=str(result.manifest_path), candidate_sha256=result.candidate_sha256,
        verification=result.verification, resume_hint=f"claude --resume {result.new_session_id}",
        **counts)


def _doctor(call: Call, given: NoInput) -> DoctorReport:
    from ..doctor.runner import run_doctor  # not imported by the commands that read

    return run_doctor(call.config)


def _request(call: Call, given: RequestInput) -> Requested:
    return service.request_rebuild(call.config, given.reason, given.confirmation,
                                   requested_by=call.via)


def _reload(call: Call, given: ReloadInput) -> Requested:
    return service.request_reload(call.config, given.confirmation, requested_by=call.via)


def _confirm(call: Call, given: ConfirmInput) -> Confirmed:
    return service.confirm(call.config, given.operation_id, given.rollback)


def _cancel(call: Call, given: CancelInput) -> Operation:
    return service.cancel(call.config, given.operation_id, given.confirmation)


def _rollback(call: Call, given: RollbackInput) -> Requested:
    op = service.rollback_request(call.config, given.operation_id, given.confirmation)
    return Requested(operation=op, joined_existing=False,
                     confirm_with=service.confirm_with(call.config, op))


def _status(call: Call, given: StatusInput) -> Found:
    op = service.status(call.config, given.operation_id)
    return Found(operation=op, skipped=service.stray_files(call.config))


def _history(call: Call, given: NoInput) -> History:
    return History(operations=service.history(call.config),
                   skipped=service.stray_files(call.config))


def _wait(call: Call, given: WaitInput) -> Waited:
    if not 0 <= given.timeout <= MAX_WAIT_SECONDS:  # also refuses nan
        raise UsageError(f"--timeout must be from 0 to {MAX_WAIT_SECONDS:g} seconds")
    op = service.wait(call.config, given.operation_id, given.timeout)
    if op is None:
        return Waited(operation=None, timed_out=False, failed=False, timeout=given.timeout)
    timed_out = not op.settled if given.operation_id else op.status in IN_FLIGHT
    return Waited(operation=op, timed_out=timed_out, failed=service.failed(op),
                  timeout=given.timeout)


def _start_failed(call: Call, given: StartFailedInput) -> StartFailed:
    op, why = service.start_failed(call.config, given.session, given.reason)
    return StartFailed(operation=op, why=why)


def _hook_stop(call: Call, given: NoInput) -> Nothing:
    """Reached only through the parser; `cli.main` sends hook-stop to `hook.run` first."""
    from .hook import read_stop_input

    raw = read_stop_input()
    with contextlib.redirect_stdout(sys.stderr):
        record_stop_input(call.config, raw)
    return Nothing()


def _serve(call: Call, given: ServeInput) -> Nothing:
    from ..daemon import serve  # not imported by the commands that read

    serve(call.config, once=given.once)
    return Nothing()


def _recover(call: Call, given: NoInput) -> Recovery:
    from ..daemon import recover_once

    return recover_once(call.config)


def _claude_pieces(call: Call, given: PiecesInput) -> ClaudePieces:
    mcp = words(given.mcp_command, "--mcp-command") if given.mcp_command else None
    if given.hook_command is not None:
        words(given.hook_command, "--hook-command")  # the hook runs through a shell
    wiring = Wiring(hook_command=given.hook_command, mcp_command=mcp, claude=given.claude,
                    timeout=given.hook_timeout, allowed=tool_names(changes=False),
                    asking=tool_names(changes=True))
    return pieces(call.config, config_path(call.config_path), wiring)


# -- what the MCP tools return -------------------------------------------------------------------

_AFTER_REPLY = ("Tell the human it is recorded, then finish your reply normally; the switch "
                "happens after the reply ends. Do not call this tool again.")


def _found(found: Found) -> StatusResult:
    return StatusResult(found=found.operation is not None, operation=found.operation)


def _requested(requested: Requested) -> OperationResult:
    op = requested.operation
    next_step = _AFTER_REPLY
    if requested.confirm_with:
        next_step = ("Nothing switches until a human confirms it: this household's admin must "
                     f"run, as root on the server: {requested.confirm_with} (you cannot; do "
                     "not try). Tell the human exactly that, then finish your reply normally; "
                     "the switch happens after a reply that ends once it is confirmed. Do not "
                     "call this tool again.")
    return OperationResult(operation_id=op.operation_id, status=op.status,
                           joined_existing=requested.joined_existing, next_step=next_step)


def _reload_requested(requested: Requested) -> OperationResult:
    op = requested.operation
    return OperationResult(
        operation_id=op.operation_id, status=op.status, joined_existing=requested.joined_existing,
        next_step="Tell the human it is recorded, then finish your reply normally; once the "
                  "reply ends, Claude Code restarts onto this same session (every word kept) "
                  "with what was added since it started. Do not call this tool again.")


def _cancelled(op: Operation) -> OperationResult:
    return OperationResult(operation_id=op.operation_id, status=op.status,
                           next_step="Nothing will be switched.")


# -- the table -----------------------------------------------------------------------------------

# In the order of the CLI's help; the MCP tools and the permissions take the read-only ones
# first (the order the model previews in: doctor, dirty, plan, status).
ACTIONS: tuple[Action[Any, Any], ...] = (
    Action(
        "doctor", "check everything a switch needs (read-only)",
        "Check the project dir and workdir encoding, the state dir, the target and the session "
        "it runs, that resume_command keeps every flag of the live Claude Code, the Stop hook "
        "and whether its last calls reached the daemon, the MCP registration and containers, "
        "image and daemon versions (with the host's facts, see image/run-doctor.sh) and that no "
        "operation is stuck. One line per check; `skip` means it cannot be known from here, "
        "`warn` that it stops no switch but needs a look (a Claude Code version this project "
        "has not verified). It changes nothing, ever: a stuck operation is reported with its "
        "fix (`recover`). Exit 1 when any check fails.",
        NoInput, DoctorReport, changes=False, run=_doctor, show=show.show_doctor,
        tool=Tool("thread_rebuild_doctor", "Check everything a rebuild and switch needs "
                  "(read-only): project dir, workdir, state dir, target, running session, "
                  "resume command flags, Stop hook and its delivery, MCP registration and "
                  "containers, stuck operations, image and daemon versions.")),
    DIRTY,
    PLAN,
    Action(
        "candidate", "write and verify a rebuilt session (preview/export)",
        "Write DIR/<new id>.jsonl and DIR/<new id>.manifest.json, verify them from disk, and "
        "print the result. Refuses (exit 1) when the plan is blocked. The source transcript is "
        "never written. To try it: copy the file into Claude Code's project folder and run "
        "`claude --resume <new id>`.",
        # It writes only into the directory given, never the engine's state: not an MCP tool.
        CandidateInput, CandidateSummary, changes=True, run=_candidate,
        show=show.show_candidate),
    Action(
        "request", "ask for a rebuild; it runs after the next Stop",
        "Record a rebuild request. Nothing happens until the current reply of the Claude Code "
        "session ends: its Stop hook schedules the operation and the daemon (`serve`) builds, "
        "verifies and switches. A request while one waits joins it; while one runs it is "
        "refused.",
        RequestInput, Requested, changes=True, confirmation=REBUILD_WORD, run=_request,
        show=show.show_requested,
        tool=Tool("thread_rebuild_request", "Record a rebuild that runs after this reply ends. "
                  "Only after showing the plan and the human agreeing. Call once; then finish "
                  "the reply normally.", OperationResult, _requested)),
    Action(
        "reload", "resume the running session anew; it runs after the next Stop",
        "Record a reload: once the current reply ends (its Stop hook), the daemon restarts the "
        "target onto the session it runs (`--resume` of its id; systemd: the pointer names it "
        "first), with a switch's checks (the target still runs the session of the Stop), "
        "health check and fallback (the session resumed again). Claude Code then loads the MCP "
        "servers, hooks and settings added since it started; no word is lost and no candidate "
        "is written. A pointer runner starts Claude Code anew on every call: there it changes "
        "nothing. Not gated by admin_confirm_minutes. A request while one waits joins it; while "
        "another operation is in flight it is refused.",
        ReloadInput, Requested, changes=True, confirmation=RELOAD_WORD, run=_reload,
        show=show.show_reload,
        tool=Tool("thread_rebuild_reload", "Restart Claude Code onto this same session after "
                  "this reply ends, keeping every word, so that MCP servers, hooks and settings "
                  "added since it started load. Only after the human agreed. Call once; then "
                  "finish the reply normally.", OperationResult, _reload_requested)),
    Action(
        "confirm", "the admin's confirmation of a rebuild (as root in the daemon's container)",
        "With admin_confirm_minutes set, a rebuild request (and a rollback request, confirmed "
        "with --rollback) awaits this: the household's admin runs it as root where the daemon "
        "runs (`docker exec -u 0 <daemon container> kael-thread-rebuild confirm --operation "
        "ID`). It writes a confirmation only root can write; the daemon then lets the request "
        "go on (pending or rollback_pending: it runs after the next Stop), and the worker checks "
        "it again before switching. Refused for any other user.",
        # The model must never confirm: not an MCP tool, and the wrapper never runs it.
        ConfirmInput, Confirmed, changes=True, run=_confirm, show=show.show_confirmed),
    Action(
        "cancel", "cancel an operation that has not started",
        "Cancel an operation awaiting confirmation, pending or scheduled; nothing is switched.",
        CancelInput, Operation, changes=True, confirmation=CANCEL_WORD, run=_cancel,
        show=show.show_cancelled,
        tool=Tool("thread_rebuild_cancel", "Cancel a rebuild that has not started yet (awaiting "
                  "confirmation, pending or scheduled).", OperationResult, _cancelled)),
    Action(
        "rollback", "return to the old session after an activated rebuild",
        "Mark an activated rebuild for rollback; the switch back happens after the next Stop "
        "of the rebuilt session. Only the latest switch can be rolled back.",
        RollbackInput, Requested, changes=True, confirmation=ROLLBACK_WORD, run=_rollback,
        show=show.show_rollback,
        tool=Tool("thread_rebuild_rollback_request", "Return to the old session after an "
                  "activated rebuild; the switch back happens after this reply ends.",
                  OperationResult, _requested)),
    Action(
        "status", "show an operation (read-only)",
        "Show an operation's record: state, sessions, backup, error and history.",
        StatusInput, Found, changes=False, run=_status, show=show.show_found,
        tool=Tool("thread_rebuild_status", "An operation's state and record (read-only).",
                  StatusResult, _found)),
    Action(
        "history", "list every operation (read-only)", "One line per operation.",
        NoInput, History, changes=False, run=_history, show=show.show_history),
    Action(
        "wait", "wait for an operation to settle",
        "Wait until the operation settles; without --operation, until no operation is "
        "scheduled or being worked on (exit 0 at once when none is). Prints the final state. "
        "Exit 1 on timeout, when the operation failed, or when a rebuild fell back to the old "
        "session.",
        # It blocks for minutes; the model must finish its reply instead: not an MCP tool.
        WaitInput, Waited, changes=False, run=_wait, show=show.show_waited),
    Action(
        "start-failed", "the pointer runner could not start the session it switched to",
        "For activation = \"pointer\": the runner's call on the session the latest rebuild "
        "switched to failed before Claude Code wrote anything (its program is missing, say). "
        "While that session never ran, schedule the switch back to the old session (the daemon "
        "does it; `wait` returns once it did); otherwise print why nothing changes. Exit 0 "
        "either way.",
        # Only the runner calls it, on its own failed start: not an MCP tool.
        StartFailedInput, StartFailed, changes=True, run=_start_failed,
        show=show.show_start_failed),
    Action(
        "hook-stop", "Claude Code's Stop hook (reads its JSON on stdin)",
        "Schedule the waiting operation from Claude Code's Stop hook input on stdin, or fail it "
        "with the reason. Prints nothing on stdout, always exits 0 and logs to "
        f"<state_dir>/{HOOK_LOG}. Install as a Stop hook command in Claude Code's settings.",
        NoInput, Nothing, changes=True, run=_hook_stop, show=show.show_nothing),
    Action(
        "serve", "the daemon that runs scheduled operations",
        "Settle whatever a previous worker left in flight, then run scheduled operations until "
        "SIGTERM/SIGINT. Run it outside Claude Code's process tree; one per state dir. Logs to "
        f"<state_dir>/{WORKER_LOG}.",
        ServeInput, Nothing, changes=True, run=_serve, show=show.show_nothing),
    Action(
        "recover", "settle what a stopped daemon left unsettled",
        "Run the recovery a daemon start runs, without serving: take every operation left in "
        "flight to a settled state and record the truth (nothing switched: failed, and its "
        "candidate moved out of project_dir; switched: check which session the target runs). "
        "Refused while a daemon serves the state dir (restarting it recovers). Prints one line "
        f"per operation settled and per file in {OPERATIONS}/ that is not a record. Logs to "
        f"<state_dir>/{WORKER_LOG}. Not an MCP tool: it can restart the session.",
        NoInput, Recovery, changes=True, run=_recover, show=show.show_recovery),
    Action(
        "claude-pieces",
        "print the settings.json block and `claude mcp add` line the installer would write",
        "Print what the installer writes for Claude Code, for a household wired by hand: the "
        "Stop hook entry and the four read-only tool permissions to merge into settings.json, "
        "and the `claude mcp add` command that registers the MCP server. A pointer base gets "
        "no hook (its runner forwards every Stop). It changes nothing.",
        PiecesInput, ClaudePieces, changes=False, run=_claude_pieces, show=show.show_pieces),
)


def tool_names(changes: bool) -> list[str]:
    """The MCP tools that change something (they keep asking the human), or those that do
    not (the installer allows them without asking)."""
    return [action.tool.name for action in ACTIONS
            if action.tool is not None and action.changes is changes]


# -- the installer's permission list -------------------------------------------------------------

ROLE_TOOLS_HEADER = '''\
"""The MCP tools as the installer's permissions see them. Generated from the engine's table of
actions by `python -m kael_thread_rebuild.interfaces.actions --write-role-tools PATH`; do not
edit (tests/test_actions.py checks that it equals the table)."""
'''


def role_tools_text() -> str:
    """The collection's `plugins/module_utils/kael_mcp_tools.py`: standard library only (Ansible
    ships it to the household)."""

    def names(changes: bool) -> str:
        return "".join(f"    {name!r},\n" for name in tool_names(changes))

    return (f"{ROLE_TOOLS_HEADER}\n"
            "#: Read-only tools: allowed without asking.\n"
            f"READ_ONLY_TOOLS = (\n{names(False)})\n"
            "#: Tools that change something: they must keep asking the human (never added to "
            "allow).\n"
            f"PROMPTING_TOOLS = (\n{names(True)})\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write what is generated from the table.")
    parser.add_argument("--write-role-tools", metavar="PATH", type=Path, required=True,
                        help="the collection's plugins/module_utils/kael_mcp_tools.py")
    args = parser.parse_args(argv)
    atomic_write_bytes(args.write_role_tools, role_tools_text().encode(), mode=0o644)
    return 0


if __name__ == "__main__":
    sys.exit(main())
