"""The human formatters of the actions: what each prints (text, or JSON with `--json`) and its
exit code. They print what the action returned and decide nothing else."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from ..doctor.model import Check, DoctorReport
from ..errors import Refused
from ..operations.model import Operation
from ..operations.service import Confirmed, Requested
from ..operations.store import Recovery, StrayFile
from .action_model import Nothing
from .claude_pieces import ClaudePieces, settings_text
from .outcomes import CandidateSummary, Found, History, StartFailed, Waited
from .output import emit, write_lines

AFTER_STOP = "runs after the current reply of the Claude Code session ends (its Stop hook)"


def _print(lines: list[str]) -> None:
    write_lines(lines)


def _time(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}Z"


def _clock(moment: datetime) -> str:
    return f"{moment:%H:%M:%S}.{moment.microsecond // 1000:03d}"


def describe(op: Operation) -> list[str]:
    """An operation for people: the facts that are set, then its history."""
    facts: list[tuple[str, Any]] = [
        ("kind", op.kind.value), ("reason", op.reason),
        ("requested", f"{_time(op.created_at)} by {op.requested_by}"),
        ("source session", op.source_session_id), ("new session", op.new_session_id),
        ("backup", op.backup_path), ("candidate", op.candidate_path),
        ("manifest", op.manifest_path),
        ("resumed with", " ".join(op.resume_argv) if op.resume_argv else None),
        ("rolled back with", " ".join(op.rollback_argv) if op.rollback_argv else None),
        ("session conflict", "yes" if op.session_conflict else None),
        ("rollback ok", None if op.rollback_ok is None else ("yes" if op.rollback_ok else "no")),
        ("error", op.error or None),
    ]
    shown = [(key, value) for key, value in facts if value is not None]
    width = max(len(key) for key, _ in shown)
    lines = [f"operation {op.operation_id}: {op.status.value}"]
    lines += [f"  {key:<{width}}  {value}" for key, value in shown]
    if op.history:
        lines.append("  history:")
        lines += [f"    {_clock(step.at)}  {step.from_status.value} -> {step.to_status.value}"
                  f"  {step.note}" for step in op.history]
    return lines


def _operation(op: Operation | None, as_json: bool, headline: str = "", **extra: Any) -> None:
    if as_json:
        emit({"operation": None if op is None else op.model_dump(mode="json"), **extra}, True)
        return
    lines = [headline] if headline else []
    _print(lines + (describe(op) if op is not None else ["no operation"]))


def _skipped(strays: list[StrayFile]) -> dict[str, Any]:
    """The `skipped` key of a JSON answer: files in operations/ that are not records."""
    return {"skipped": [stray.model_dump(mode="json") for stray in strays]}


# -- reports -------------------------------------------------------------------------------------


def show_candidate(summary: CandidateSummary, as_json: bool) -> int:
    """Printed whatever the verification said; refused (exit 1) when it failed."""
    emit(summary, as_json)
    if not summary.verification.ok:
        raise Refused(f"verification failed: {summary.verification.errors[0]}")
    return 0


def _status_word(check: Check) -> str:
    if not check.ok:
        return "FAIL"
    if check.warning:
        return "warn"
    return "skip" if check.skipped else "ok"


def doctor_lines(checks: list[Check]) -> list[str]:
    width = max((len(check.name) for check in checks), default=0)
    lines = []
    for check in checks:
        line = f"{_status_word(check):<4}  {check.name:<{width}}  {check.detail}"
        if (not check.ok or check.warning) and check.fix:
            line += f" — fix: {check.fix}"
        lines.append(line)
    return lines


def show_doctor(report: DoctorReport, as_json: bool) -> int:
    """One line per check; exit 1 when any check fails."""
    if as_json:
        emit(report, True)
    else:
        _print(doctor_lines(report.checks))
    return 0 if report.ok else 1


# -- state changes -------------------------------------------------------------------------------


def _confirmed_by(requested: Requested) -> str:
    if not requested.confirm_with:
        return ""
    return f", once the household's admin has confirmed it as root: {requested.confirm_with}"


def show_requested(requested: Requested, as_json: bool) -> int:
    joined = requested.joined_existing
    headline = ("joined the operation already waiting; it " if joined
                else "rebuild requested; it ") + AFTER_STOP + _confirmed_by(requested)
    _operation(requested.operation, as_json, headline, joined_existing=joined)
    return 0


def show_reload(requested: Requested, as_json: bool) -> int:
    headline = ("joined the reload already waiting; it " if requested.joined_existing
                else "reload requested; it ") + AFTER_STOP + (
        ": the session that runs is resumed, with the MCP servers, hooks and settings added "
        "since it started")
    _operation(requested.operation, as_json, headline, joined_existing=requested.joined_existing)
    return 0


def show_confirmed(confirmed: Confirmed, as_json: bool) -> int:
    if as_json:
        emit(confirmed, True)
    else:
        _print([f"confirmed: operation {confirmed.operation_id} ({confirmed.evidence}); the "
                "daemon takes it up at its next look and `status` shows it pending: it "
                + AFTER_STOP])
    return 0


def show_cancelled(op: Operation, as_json: bool) -> int:
    _operation(op, as_json, "cancelled; nothing will be switched")
    return 0


def show_rollback(requested: Requested, as_json: bool) -> int:
    _operation(requested.operation, as_json,
               "rollback requested; it " + AFTER_STOP + _confirmed_by(requested))
    return 0


def show_start_failed(result: StartFailed, as_json: bool) -> int:
    if result.operation is None and not as_json:
        _print([f"nothing to do: {result.why}"])
    elif result.operation is None:
        _operation(None, True, changed=False, why=result.why)
    else:
        _operation(result.operation, as_json,
                   "the old session will be resumed; `wait` returns once it is",
                   changed=True, why="")
    return 0


# -- reading -------------------------------------------------------------------------------------


def show_found(found: Found, as_json: bool) -> int:
    op, strays = found.operation, found.skipped
    if as_json:
        _operation(op, True, **_skipped(strays))
    elif op is None:
        _print(["no operation yet", *(stray.line() for stray in strays)])
    else:
        _print(describe(op) + [stray.line() for stray in strays])
    return 0


def show_history(history: History, as_json: bool) -> int:
    ops, strays = history.operations, history.skipped
    if as_json:
        emit({"operations": [op.model_dump(mode="json") for op in ops], **_skipped(strays)},
             True)
        return 0
    width = max((len(op.status.value) for op in ops), default=0)
    _print([f"{op.operation_id}  {op.status.value:<{width}}  {op.kind.value:<11}  {op.reason}"
            for op in ops] or ["no operation yet"])
    _print([stray.line() for stray in strays])
    return 0


def show_waited(waited: Waited, as_json: bool) -> int:
    """Exit 1 on timeout, when the operation failed, or when a rebuild fell back."""
    op = waited.operation
    if op is None:
        if as_json:
            _operation(None, True, timed_out=False)
        else:
            _print(["no operation in flight"])
        return 0
    headline = (f"timed out after {waited.timeout:g} s; operation {op.operation_id} is still "
                f"{op.status.value}") if waited.timed_out else ""
    _operation(op, as_json, headline, timed_out=waited.timed_out)
    return 1 if waited.timed_out or waited.failed else 0


# -- the Stop hook, the daemon, the installer's pieces -------------------------------------------


def show_nothing(_: Nothing, as_json: bool) -> int:
    """`hook-stop`, `serve`: they log instead of printing."""
    return 0


def show_recovery(done: Recovery, as_json: bool) -> int:
    if as_json:
        emit(done, True)
        return 0
    lines = [f"operation {op.operation_id}: {op.history[-1].from_status.value} -> "
             f"{op.status.value}" + (f": {op.error}" if op.error else "")
             for op in done.settled if op.history]
    _print(lines or ["nothing to recover: no operation was left unsettled"])
    _print([stray.line() for stray in done.skipped])
    return 0


def show_pieces(found: ClaudePieces, as_json: bool) -> int:
    if as_json:
        emit(found, True)
        return 0
    sys.stdout.write(
        f"# {found.settings_path}: merge these keys into the file, keeping everything already "
        f"there\n{settings_text(found)}"
        "# the tools that change something keep asking: never allow "
        f"{', '.join(found.asking_tools)}\n"
        "# register the MCP server, as the user Claude Code runs as\n"
        f"{found.mcp_add_command}\n")
    return 0
