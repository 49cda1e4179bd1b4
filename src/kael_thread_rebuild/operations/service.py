"""What the CLI, the MCP server and the Stop hook call: short, locked state changes only.

Slow work (hashing, building, switching, health checks) belongs to the worker.
"""

from __future__ import annotations

import time
from datetime import timedelta

from pydantic import BaseModel

from ..config import Activation, Config
from ..defaults import MAX_REASON_CHARS
from ..errors import Refused, UsageError
from ..paths import shown
from ..switching.base import SwitchBase
from .confirmation import (
    REBUILD,
    ROLLBACK,
    confirm_command,
    confirmation_problem,
    kind_of,
    write_confirmation,
)
from .files import confined, sha256_file
from .model import (
    IN_FLIGHT,
    WAITING,
    Operation,
    OperationKind,
    OperationNotFound,
    OperationStatus,
    is_session_id,
    new_operation_id,
    require_operation_id,
    utcnow,
)
from .stop_input import StopHookInput, check_stop
from .store import OperationStore, StrayFile, UntrustedStateDir, trust_problem

REBUILD_WORD = "REBUILD"
CANCEL_WORD = "CANCEL"
ROLLBACK_WORD = "ROLLBACK"
RELOAD_WORD = "RELOAD"
RELOAD_REASON = "reload: resume the running session so that Claude Code loads what was added"
_JOINABLE = frozenset({OperationStatus.awaiting_confirmation, OperationStatus.pending,
                       OperationStatus.scheduled})


def open_store(config: Config) -> OperationStore:
    return OperationStore(config.state_dir)


def _reading_store(config: Config, operation_id: str | None = None) -> OperationStore | None:
    """The store to read OPERATION_ID (or any operation) from, None when there is none yet:
    reading creates nothing. A malformed id, or any id before there is a store, is refused."""
    if operation_id is not None:
        _checked_id(operation_id)
    for folder in (config.state_dir, config.layout.operations):
        if folder.is_dir() and (problem := trust_problem(folder)):
            raise UntrustedStateDir(f"state dir not trusted: {problem}")
    if not config.layout.operations.is_dir():
        if operation_id is not None:
            raise OperationNotFound(f"no operation {operation_id!r}")
        return None
    return open_store(config)


def _checked_id(operation_id: str) -> str:
    """OPERATION_ID when it has the shape of one; refused naming it shortened otherwise."""
    try:
        return require_operation_id(operation_id)
    except OperationNotFound:
        raise OperationNotFound(f"no operation '{shown(operation_id)}': not an operation "
                                "id") from None


def require_reason(reason: str) -> str:
    """The reason as recorded (stripped); refused when empty or over MAX_REASON_CHARS."""
    if len(reason) > MAX_REASON_CHARS:
        raise UsageError(f"the reason has {len(reason)} characters; at most "
                         f"{MAX_REASON_CHARS} are allowed")
    if not reason.strip():
        raise UsageError("a rebuild request needs a reason")
    return reason.strip()


def _require_word(confirmation: str, word: str, action: str) -> None:
    if confirmation != word:
        raise Refused(f"to {action}, the confirmation must be exactly {word}")


class Requested(BaseModel):
    """What a rebuild request did: the operation waiting for the Stop, and whether it was
    already waiting (the request joined it) rather than recorded by this request."""

    operation: Operation
    joined_existing: bool
    #: With `admin_confirm_minutes`: the command the admin confirms it with ("" without).
    confirm_with: str = ""


def request_rebuild(config: Config, reason: str, confirmation: str,
                    requested_by: str = "cli") -> Requested:
    """Record a pending rebuild; it runs after the next Stop. Joins one already waiting. With
    `admin_confirm_minutes`, it first awaits the admin's confirmation (`confirm`)."""
    _require_word(confirmation, REBUILD_WORD, "request a rebuild")
    reason = require_reason(reason)
    store = open_store(config)
    with store.locked():
        active = store.active()
        if active is not None:
            if (active.status in _JOINABLE and kind_of(active) == REBUILD
                    and not active.is_reload):
                return Requested(operation=active, joined_existing=True,
                                 confirm_with=confirm_with(config, active))
            _refuse_busy(active)
        now = utcnow()
        status = (OperationStatus.awaiting_confirmation if config.admin_confirm_minutes
                  else OperationStatus.pending)
        created = store.create(Operation(operation_id=new_operation_id(now), created_at=now,
                                         updated_at=now, reason=reason, status=status,
                                         requested_by=requested_by))
        return Requested(operation=created, joined_existing=False,
                         confirm_with=confirm_with(config, created))


def _refuse_busy(active: Operation) -> None:
    rollback = (OperationStatus.rollback_pending, OperationStatus.rollback_scheduled)
    what = ("a reload" if active.is_reload
            else "a rollback" if active.status in rollback or kind_of(active) == ROLLBACK
            else "a rebuild")
    raise Refused(f"operation {active.operation_id} ({what}) is {active.status.value}; "
                  "wait for it to finish")


def request_reload(config: Config, confirmation: str, requested_by: str = "cli") -> Requested:
    """Record a reload: after the next Stop the worker restarts the target onto the session it
    runs (`--resume` of its id), with the same checks and fallback as a switch, so that Claude
    Code loads MCP servers, hooks and settings added since it started. Joins one already
    waiting. No candidate, nothing for the admin to confirm: the conversation does not change."""
    _require_word(confirmation, RELOAD_WORD, "request a reload")
    store = open_store(config)
    with store.locked():
        active = store.active()
        if active is not None:
            if active.is_reload and active.status in _JOINABLE:
                return Requested(operation=active, joined_existing=True)
            _refuse_busy(active)
        now = utcnow()
        created = store.create(Operation(operation_id=new_operation_id(now), created_at=now,
                                         updated_at=now, reason=RELOAD_REASON,
                                         kind=OperationKind.reload,
                                         status=OperationStatus.pending,
                                         requested_by=requested_by))
        return Requested(operation=created, joined_existing=False)


def confirm_with(config: Config, op: Operation) -> str:
    """The command the admin confirms OP with, when it awaits that ("" otherwise)."""
    if op.status is not OperationStatus.awaiting_confirmation:
        return ""
    return confirm_command(config, op.operation_id, kind_of(op))


def request(config: Config, reason: str, confirmation: str,
            requested_by: str = "cli") -> Operation:
    """`request_rebuild`'s operation."""
    return request_rebuild(config, reason, confirmation, requested_by).operation


def cancel(config: Config, operation_id: str, confirmation: str) -> Operation:
    _require_word(confirmation, CANCEL_WORD, "cancel an operation")
    operation_id = _checked_id(operation_id)
    store = open_store(config)
    with store.locked():
        op = store.load(operation_id)
        if op.status not in _JOINABLE:
            raise Refused(f"operation {operation_id} is {op.status.value}; only an operation "
                          "awaiting confirmation, pending or scheduled can be cancelled")
        if kind_of(op) == ROLLBACK:  # a rollback awaiting the admin: the rebuild stays
            return store.transition(operation_id, OperationStatus.activated,
                                    "rollback cancelled on request")
        return store.transition(operation_id, OperationStatus.cancelled, "cancelled on request")


class Confirmed(BaseModel):
    """What the admin's `confirm` wrote; the daemon takes it up at its next look at the store."""

    operation_id: str
    evidence: str


def confirm(config: Config, operation_id: str, rollback: bool = False) -> Confirmed:
    """The admin's confirmation of a rebuild (with ROLLBACK: of its rollback) awaiting it: as
    root, never reachable by the model (`confirmation`). It writes the confirmation only: the
    state dir is the Claude user's."""
    path = write_confirmation(config, _checked_id(operation_id), ROLLBACK if rollback else REBUILD)
    return Confirmed(operation_id=operation_id, evidence=str(path))


def take_confirmations(config: Config) -> list[Operation]:
    """The daemon's look at what awaits the admin: a confirmed request goes on to pending (a
    rollback to rollback_pending: it runs after the next Stop); one unconfirmed for
    `admin_confirm_minutes` is cancelled (a rollback: the rebuild stays activated)."""
    store = _reading_store(config)
    if store is None:
        return []
    expiry = timedelta(minutes=config.admin_confirm_minutes)
    changed = []
    with store.locked():
        for op in store.unsettled():
            if op.status is not OperationStatus.awaiting_confirmation:
                continue
            kind = kind_of(op)
            late = (f"the admin did not confirm it within {config.admin_confirm_minutes} "
                    f"minute(s) (admin_confirm_minutes): "
                    f"{confirm_command(config, op.operation_id, kind)}")
            if not confirmation_problem(config, op.operation_id, kind):
                to = (OperationStatus.rollback_pending if kind == ROLLBACK
                      else OperationStatus.pending)
                changed.append(store.transition(op.operation_id, to, "confirmed by the admin"))
            elif utcnow() - op.updated_at <= expiry:
                continue
            elif kind == ROLLBACK:
                changed.append(store.transition(op.operation_id, OperationStatus.activated,
                                                f"rollback not confirmed in time: {late}"))
            else:
                changed.append(store.transition(op.operation_id, OperationStatus.cancelled,
                                                "not confirmed in time", error=late))
    return changed


def rollback_request(config: Config, operation_id: str, confirmation: str) -> Operation:
    """Mark an activated rebuild for rollback; the switch back happens after the next Stop."""
    _require_word(confirmation, ROLLBACK_WORD, "roll back an operation")
    operation_id = _checked_id(operation_id)
    store = open_store(config)
    with store.locked():
        op = store.load(operation_id)
        if op.is_reload:
            raise Refused(f"operation {operation_id} is a reload: it resumed the session that "
                          "ran, there is no other session to go back to")
        if op.status is not OperationStatus.activated:
            raise Refused(f"operation {operation_id} is {op.status.value}; only an activated "
                          "operation can be rolled back")
        for other in store.list_operations():
            if other.operation_id == operation_id:
                continue
            if not other.settled:
                raise Refused(f"operation {other.operation_id} is {other.status.value}; wait for "
                              "it to finish or cancel it first")
            if other.created_at > op.created_at and other.switched_session:
                raise Refused(f"operation {other.operation_id} switched the target later; only "
                              "the latest switch can be rolled back")
        if not op.source_path or not confined(config.project_dir, op.source_path).is_file():
            raise Refused(f"the old session's transcript {op.source_path} is gone; "
                          "nothing to roll back to")
        if config.admin_confirm_minutes:
            return store.transition(operation_id, OperationStatus.awaiting_confirmation,
                                    "rollback requested; awaiting the admin's confirmation")
        return store.transition(operation_id, OperationStatus.rollback_pending,
                                "rollback requested")


def start_failed(config: Config, session_id: str, detail: str) -> tuple[Operation | None, str]:
    """The pointer runner could not start SESSION_ID, the session the latest rebuild switched to
    (the program is missing, the call failed before Claude Code wrote a word): schedule the
    switch back to the old session, with no Stop to wait for since nothing runs. Returns the
    operation and an empty string, or None and why nothing changed.

    Only while that session never ran: its transcript is still the candidate as written, so
    going back loses nothing. The pointer base learns of a failed start only here: its runner
    starts the new session at its next call, after the operation settled.
    """
    if config.activation is not Activation.pointer:
        raise Refused("only the pointer base's runner reports a failed start; the other bases "
                      "check the start themselves")
    if not is_session_id(session_id):
        raise UsageError(f"'{shown(session_id)}' is not a Claude Code session id")
    detail = " ".join(detail.split())[:MAX_REASON_CHARS] or "no detail"
    store = _reading_store(config)
    if store is None:
        return None, "no operation yet"
    with store.locked():
        op, why_not = _switched_to_unrun(config, store.list_operations(), session_id)
        if op is None:
            return None, why_not
        store.transition(op.operation_id, OperationStatus.rollback_pending,
                         "the runner could not start the new session",
                         error=f"the runner could not start session {session_id}: {detail}")
        return store.transition(op.operation_id, OperationStatus.rollback_scheduled,
                                "nothing runs: no Stop to wait for"), ""


def _switched_to_unrun(config: Config, ops: list[Operation],
                       session_id: str) -> tuple[Operation | None, str]:
    """The activated rebuild that switched to SESSION_ID last, while that session never ran and
    the old one is still there; or None and why not."""
    switched = [op for op in ops if op.switched_session]
    op = switched[-1] if switched else None
    if op is None or op.status is not OperationStatus.activated or op.new_session_id != session_id:
        return None, f"no activated rebuild switched to session {session_id} last"
    if any(other.status in IN_FLIGHT for other in ops):
        return None, "an operation is in flight"
    try:
        unchanged = sha256_file(confined(config.project_dir, f"{session_id}.jsonl")) \
            == op.candidate_sha256
    except OSError:
        unchanged = False
    if not unchanged:
        return None, f"session {session_id} has run since the switch (its transcript changed)"
    if not op.source_path or not confined(config.project_dir, op.source_path).is_file():
        return None, f"the old session's transcript {op.source_path} is gone"
    return op, ""


def status(config: Config, operation_id: str | None = None) -> Operation | None:
    """One operation; without an id, the one in flight, else the latest (None when none)."""
    store = _reading_store(config, operation_id)
    if store is None:
        return None
    if operation_id is not None:
        return store.load(operation_id)
    return store.active() or store.latest()


def history(config: Config) -> list[Operation]:
    store = _reading_store(config)
    return [] if store is None else store.list_operations()


def stray_files(config: Config) -> list[StrayFile]:
    """Files in the operations dir that are not records (skipped by every command)."""
    store = _reading_store(config)
    return [] if store is None else store.scan().strays


def record_stop(config: Config, hook_input: StopHookInput,
                base: SwitchBase | None = None) -> Operation | None:
    """The Stop hook's whole job: schedule the waiting operation, or fail it with the reason.

    BASE, when given, lets the hook check that the Stop came from the session the target runs.
    Returns the operation it changed, None when nothing was waiting.
    """
    store = open_store(config)
    if not any(op.status in WAITING for op in store.unsettled()):
        return None
    facts = check_stop(config, hook_input, base)  # outside the lock: it may ask the base
    with store.locked():
        op = store.active()
        if op is None or op.status not in WAITING:
            return None
        if op.status is OperationStatus.pending:
            if isinstance(facts, str):
                return store.transition(op.operation_id, OperationStatus.failed,
                                        "Stop hook input refused", error=facts)
            return store.transition(op.operation_id, OperationStatus.scheduled, "Stop received",
                                    hook=facts,
                                    source_path=facts.transcript_path,
                                    source_session_id=facts.session_id)
        if not isinstance(facts, str) and facts.session_id != op.new_session_id:
            facts = (f"the Stop came from session {facts.session_id}, not from the rebuilt "
                     f"session {op.new_session_id}")
        if isinstance(facts, str):
            return store.transition(op.operation_id, OperationStatus.failed,
                                    "Stop hook input refused",
                                    error=f"rollback not performed: {facts}; the rebuilt "
                                          "session still runs")
        return store.transition(op.operation_id, OperationStatus.rollback_scheduled,
                                "Stop received", rollback_hook=facts)


def failed(op: Operation) -> bool:
    """Whether a settled operation did not do what was asked: failed, or a rebuild that fell
    back to the old session, also when the pointer runner could not start the new one (a
    requested rollback that ends rolled_back succeeded, and records no error)."""
    if op.status is OperationStatus.failed:
        return True
    asked_back = any(step.to_status is OperationStatus.rollback_scheduled for step in op.history)
    return op.status is OperationStatus.rolled_back and (not asked_back or bool(op.error))


def wait(config: Config, operation_id: str | None, timeout: float) -> Operation | None:
    """Poll until the operation settles, or TIMEOUT seconds pass; returns its latest record.

    Without an id (runner loops), wait until no operation is scheduled or being worked on, and
    return the one that was (None when there was none).
    """
    store = _reading_store(config, operation_id)
    if store is None:
        return None
    deadline = time.monotonic() + timeout
    seen: Operation | None = None
    while True:
        if operation_id is not None:
            seen = store.load(operation_id)
            done = seen.settled
        else:
            active = store.active()
            done = active is None or active.status not in IN_FLIGHT
            if active is not None:
                seen = active
            elif seen is not None:
                seen = store.load(seen.operation_id)
        remaining = deadline - time.monotonic()
        if done or remaining <= 0:
            return seen
        time.sleep(min(config.poll_interval_seconds, remaining))
