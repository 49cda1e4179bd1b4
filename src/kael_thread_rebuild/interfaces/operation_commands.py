"""Operation commands: request, cancel, rollback, status, history, wait, start-failed,
hook-stop, serve, recover.

The engine is imported inside the handlers: `hook-stop` runs after every reply of the Claude Code
session and must return fast, so its import path stays as short as the CLI allows.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..defaults import MAX_REASON_CHARS
from ..state_layout import HOOK_LOG, OPERATIONS, WORKER_LOG
from .output import emit

if TYPE_CHECKING:
    from ..operations.model import Operation
    from ..operations.store import StrayFile

DEFAULT_WAIT_SECONDS = 600.0
MAX_WAIT_SECONDS = 7 * 86400.0

_AFTER_STOP = "runs after the current reply of the Claude Code session ends (its Stop hook)"


# -- printing ------------------------------------------------------------------------------------


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


def _print(lines: list[str]) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))


def _show(op: Operation | None, args: argparse.Namespace, headline: str = "",
          **extra: Any) -> None:
    if args.json:
        emit({"operation": None if op is None else op.model_dump(mode="json"), **extra}, True)
        return
    lines = [headline] if headline else []
    _print(lines + (describe(op) if op is not None else ["no operation"]))


# -- state changes -------------------------------------------------------------------------------


def _request(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service
    from ..operations.model import utcnow

    asked_at = utcnow()
    op = service.request(config, args.reason, args.confirm, requested_by="cli")
    joined = op.created_at < asked_at
    headline = ("joined the operation already waiting; it " if joined
                else "rebuild requested; it ") + _AFTER_STOP
    _show(op, args, headline, joined_existing=joined)
    return 0


def _cancel(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service

    op = service.cancel(config, args.operation, args.confirm)
    _show(op, args, "cancelled; nothing will be switched")
    return 0


def _rollback(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service

    op = service.rollback_request(config, args.operation, args.confirm)
    _show(op, args, "rollback requested; it " + _AFTER_STOP)
    return 0


# -- reading -------------------------------------------------------------------------------------


def _skipped(strays: list[StrayFile]) -> dict[str, Any]:
    """The `skipped` key of a JSON answer: files in operations/ that are not records."""
    return {"skipped": [stray.model_dump(mode="json") for stray in strays]}


def _status(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service

    op = service.status(config, args.operation)
    strays = service.stray_files(config)
    if op is None and not args.json:
        _print(["no operation yet", *(stray.line() for stray in strays)])
        return 0
    if args.json:
        _show(op, args, **_skipped(strays))
        return 0
    _print(describe(op) if op is not None else [])
    _print([stray.line() for stray in strays])
    return 0


def _history(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service

    ops = service.history(config)
    strays = service.stray_files(config)
    if args.json:
        emit({"operations": [op.model_dump(mode="json") for op in ops], **_skipped(strays)},
             True)
        return 0
    width = max((len(op.status.value) for op in ops), default=0)
    _print([f"{op.operation_id}  {op.status.value:<{width}}  {op.kind.value:<11}  {op.reason}"
            for op in ops] or ["no operation yet"])
    _print([stray.line() for stray in strays])
    return 0


def failed(op: Operation) -> bool:
    """Whether a settled operation did not do what was asked: failed, or a rebuild that fell
    back to the old session, also when the pointer runner could not start the new one (a
    requested rollback that ends rolled_back succeeded, and records no error)."""
    from ..operations.model import OperationStatus as S

    if op.status is S.failed:
        return True
    asked_back = any(step.to_status is S.rollback_scheduled for step in op.history)
    return op.status is S.rolled_back and (not asked_back or bool(op.error))


def _wait(config: Config, args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..operations import service
    from ..operations.model import IN_FLIGHT

    if not 0 <= args.timeout <= MAX_WAIT_SECONDS:  # also refuses nan
        raise UsageError(f"--timeout must be from 0 to {MAX_WAIT_SECONDS:g} seconds")
    op = service.wait(config, args.operation, args.timeout)
    if op is None:
        if args.json:
            _show(None, args, timed_out=False)
        else:
            _print(["no operation in flight"])
        return 0
    timed_out = not op.settled if args.operation else op.status in IN_FLIGHT
    headline = (f"timed out after {args.timeout:g} s; operation {op.operation_id} is still "
                f"{op.status.value}") if timed_out else ""
    _show(op, args, headline, timed_out=timed_out)
    return 1 if timed_out or failed(op) else 0


def _start_failed(config: Config, args: argparse.Namespace) -> int:
    from ..operations import service

    op, why = service.start_failed(config, args.session, args.reason)
    if op is None:
        if args.json:
            _show(None, args, changed=False, why=why)
        else:
            _print([f"nothing to do: {why}"])
        return 0
    _show(op, args, "the old session will be resumed; `wait` returns once it is", changed=True,
          why="")
    return 0


# -- the Stop hook and the daemon ----------------------------------------------------------------


def _hook_stop(config: Config, args: argparse.Namespace) -> int:
    """Reached only through the parser; `cli.main` sends hook-stop to `hook.run` first."""
    from .hook import read_stop_input

    raw = read_stop_input()
    with contextlib.redirect_stdout(sys.stderr):
        record_stop_input(config, raw)
    return 0


def record_stop_input(config: Config, raw: bytes) -> None:
    """Record one Stop; never raises (the hook must not block Claude), logs what happened."""
    try:
        _record_stop(config, raw)
    except Exception as exc:
        _hook_log(config, f"hook-stop error: {type(exc).__name__}: {exc}")


def _record_stop(config: Config, raw: bytes) -> None:
    from ..operations.service import record_stop
    from ..operations.stop_input import StopHookInput
    from ..switching.base import SwitchBase
    from ..switching.factory import make_base

    base: SwitchBase | None
    try:
        base = make_base(config)
    except Exception:
        base = None  # the Stop is still recorded; the worker's identity checks still apply
    op = record_stop(config, StopHookInput.parse(raw), base)
    if op is not None:
        line = f"hook-stop: operation {op.operation_id} -> {op.status.value}"
        _hook_log(config, f"{line}: {op.error}" if op.error else line)


def _hook_log(config: Config, message: str) -> None:
    from ..logline import append_line

    try:
        append_line(config.layout.hook_log, message)
    except OSError as exc:
        print(f"hook-stop: {message} (cannot write {HOOK_LOG}: {exc.strerror})", file=sys.stderr)


def _serve(config: Config, args: argparse.Namespace) -> int:
    from ..daemon import serve

    serve(config, once=args.once)
    return 0


def _recover(config: Config, args: argparse.Namespace) -> int:
    from ..daemon import recover_once

    done = recover_once(config)
    if args.json:
        emit(done, True)
        return 0
    lines = [f"operation {op.operation_id}: {op.history[-1].from_status.value} -> "
             f"{op.status.value}" + (f": {op.error}" if op.error else "")
             for op in done.settled if op.history]
    _print(lines or ["nothing to recover: no operation was left unsettled"])
    _print([stray.line() for stray in done.skipped])
    return 0


# -- registration --------------------------------------------------------------------------------


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             parent: argparse.ArgumentParser) -> None:
    def add(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, parents=[parent], help=summary, description=description)

    def operation_arg(parser: argparse.ArgumentParser, required: bool, default: str) -> None:
        parser.add_argument("--operation", metavar="ID", required=required,
                            help=f"the operation id a request printed{default}")

    request = add("request", "ask for a rebuild; it runs after the next Stop",
                  "Record a rebuild request. Nothing happens until the current reply of the "
                  "Claude Code session ends: its Stop hook schedules the operation and the "
                  "daemon (`serve`) builds, verifies and switches. A request while one waits "
                  "joins it; while one runs it is refused.")
    request.add_argument("--reason", required=True,
                         help=f"why the rebuild is wanted (at most {MAX_REASON_CHARS} "
                              "characters)")
    request.add_argument("--confirm", required=True, metavar="WORD", help="exactly REBUILD")
    request.set_defaults(handler=_request)

    cancel = add("cancel", "cancel an operation that has not started",
                 "Cancel a pending or scheduled operation; nothing is switched.")
    operation_arg(cancel, True, "")
    cancel.add_argument("--confirm", required=True, metavar="WORD", help="exactly CANCEL")
    cancel.set_defaults(handler=_cancel)

    rollback = add("rollback", "return to the old session after an activated rebuild",
                   "Mark an activated rebuild for rollback; the switch back happens after the "
                   "next Stop of the rebuilt session. Only the latest switch can be rolled back.")
    operation_arg(rollback, True, "")
    rollback.add_argument("--confirm", required=True, metavar="WORD", help="exactly ROLLBACK")
    rollback.set_defaults(handler=_rollback)

    status = add("status", "show an operation (read-only)",
                 "Show an operation's record: state, sessions, backup, error and history.")
    operation_arg(status, False, "; default: the one in flight, else the latest")
    status.set_defaults(handler=_status)

    history = add("history", "list every operation (read-only)", "One line per operation.")
    history.set_defaults(handler=_history)

    wait = add("wait", "wait for an operation to settle",
               "Wait until the operation settles; without --operation, until no operation is "
               "scheduled or being worked on (exit 0 at once when none is). Prints the final "
               "state. Exit 1 on timeout, when the operation failed, or when a rebuild fell "
               "back to the old session.")
    operation_arg(wait, False, "; default: whatever is in flight")
    wait.add_argument("--timeout", type=float, default=DEFAULT_WAIT_SECONDS, metavar="S",
                      help=f"seconds to wait at most (default {DEFAULT_WAIT_SECONDS:g})")
    wait.set_defaults(handler=_wait)

    start = add("start-failed", "the pointer runner could not start the session it switched to",
                "For activation = \"pointer\": the runner's call on the session the latest "
                "rebuild switched to failed before Claude Code wrote anything (its program is "
                "missing, say). While that session never ran, schedule the switch back to the "
                "old session (the daemon does it; `wait` returns once it did); otherwise print "
                "why nothing changes. Exit 0 either way.")
    start.add_argument("--session", required=True, metavar="ID",
                       help="the session id the failed call resumed")
    start.add_argument("--reason", required=True, help="what failed, in one line")
    start.set_defaults(handler=_start_failed)

    hook = add("hook-stop", "Claude Code's Stop hook (reads its JSON on stdin)",
               "Schedule the waiting operation from Claude Code's Stop hook input on stdin, or "
               "fail it with the reason. Prints nothing on stdout, always exits 0 and logs to "
               f"<state_dir>/{HOOK_LOG}. Install as a Stop hook command in Claude Code's "
               "settings.")
    hook.set_defaults(handler=_hook_stop)

    serve = add("serve", "the daemon that runs scheduled operations",
                "Settle whatever a previous worker left in flight, then run scheduled "
                "operations until SIGTERM/SIGINT. Run it outside Claude Code's process tree; "
                f"one per state dir. Logs to <state_dir>/{WORKER_LOG}.")
    serve.add_argument("--once", action="store_true",
                       help="recover and run what is ready once, then exit")
    serve.set_defaults(handler=_serve)

    recover = add("recover", "settle what a stopped daemon left unsettled",
                  "Run the recovery a daemon start runs, without serving: take every "
                  "operation left in flight to a settled state and record the truth (nothing "
                  "switched: failed, and its candidate moved out of project_dir; switched: "
                  "check which session the target runs). Refused while a daemon serves the "
                  "state dir (restarting it recovers). Prints one line per operation settled "
                  f"and per file in {OPERATIONS}/ that is not a record. Logs to "
                  f"<state_dir>/{WORKER_LOG}. Not an MCP tool: it can restart the session.")
    recover.set_defaults(handler=_recover)
