"""The operation record and its state machine (spec §8). Records never hold conversation text."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, field_validator

from ..candidate.verifier import Verification
from ..errors import KaelError, UsageError
from ..switching.base import Identity
from .statuses import OPERATION_ID_PATTERN


class OperationStatus(StrEnum):
    awaiting_confirmation = "awaiting_confirmation"
    pending = "pending"
    scheduled = "scheduled"
    running = "running"
    verifying = "verifying"
    activating = "activating"
    activated = "activated"
    cancelled = "cancelled"
    failed = "failed"
    rolled_back = "rolled_back"
    rollback_pending = "rollback_pending"
    rollback_scheduled = "rollback_scheduled"


# Spec §8. Two additions: awaiting_confirmation before pending (config `admin_confirm_minutes`);
# and scheduled → cancelled, so that CANCEL also works after the Stop and before the worker
# claims the operation (both moves happen under the store lock, so they cannot both win).
TRANSITIONS: dict[OperationStatus, frozenset[OperationStatus]] = {
    # With `admin_confirm_minutes`: a request waits for the admin's `confirm`, or expires; a
    # rebuild's goes on to pending or is cancelled, a rollback's to rollback_pending or back.
    OperationStatus.awaiting_confirmation: frozenset({
        OperationStatus.pending, OperationStatus.cancelled,
        OperationStatus.rollback_pending, OperationStatus.activated,
    }),
    OperationStatus.pending: frozenset({
        OperationStatus.scheduled, OperationStatus.cancelled, OperationStatus.failed,
    }),
    OperationStatus.scheduled: frozenset({
        OperationStatus.running, OperationStatus.cancelled, OperationStatus.failed,
    }),
    OperationStatus.running: frozenset({OperationStatus.verifying, OperationStatus.failed}),
    OperationStatus.verifying: frozenset({OperationStatus.activating, OperationStatus.failed}),
    OperationStatus.activating: frozenset({
        OperationStatus.activated, OperationStatus.rolled_back, OperationStatus.failed,
    }),
    OperationStatus.activated: frozenset({OperationStatus.rollback_pending,
                                          OperationStatus.awaiting_confirmation}),
    OperationStatus.rollback_pending: frozenset({
        OperationStatus.rollback_scheduled, OperationStatus.failed,
    }),
    OperationStatus.rollback_scheduled: frozenset({
        OperationStatus.rolled_back, OperationStatus.failed,
    }),
    OperationStatus.cancelled: frozenset(),
    OperationStatus.failed: frozenset(),
    OperationStatus.rolled_back: frozenset(),
}

# Settled: nothing is in flight (activated can still be reopened by a rollback request).
SETTLED = frozenset({OperationStatus.activated, OperationStatus.cancelled, OperationStatus.failed,
                     OperationStatus.rolled_back})
# Waiting for the next Stop hook.
WAITING = frozenset({OperationStatus.pending, OperationStatus.rollback_pending})
# Ready for the worker.
RUNNABLE = frozenset({OperationStatus.scheduled, OperationStatus.rollback_scheduled})
# Owned by the worker until it settles them.
IN_FLIGHT = RUNNABLE | {OperationStatus.running, OperationStatus.verifying,
                        OperationStatus.activating}

OPERATION_ID = re.compile(OPERATION_ID_PATTERN)
# Claude Code names a session (and its transcript file) by a UUID.
SESSION_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                        r"[0-9a-fA-F]{12}$")


class IllegalTransition(KaelError):
    """A state change the state machine does not allow."""

    def __init__(self, operation_id: str, current: OperationStatus,
                 wanted: OperationStatus) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none, it is final"
        super().__init__(
            f"operation {operation_id}: illegal transition {current.value} -> {wanted.value} "
            f"(allowed from {current.value}: {allowed})"
        )
        self.current = current
        self.wanted = wanted


class OperationNotFound(UsageError):
    """No operation with that id."""


def require_transition(operation_id: str, current: OperationStatus,
                       wanted: OperationStatus) -> None:
    if wanted not in TRANSITIONS[current]:
        raise IllegalTransition(operation_id, current, wanted)


def require_operation_id(operation_id: str) -> str:
    """Operation ids become file names: anything but the generated shape is refused."""
    if not OPERATION_ID.fullmatch(operation_id):
        raise OperationNotFound(f"no operation {operation_id!r}: not an operation id")
    return operation_id


def is_session_id(value: str) -> bool:
    return SESSION_ID.fullmatch(value) is not None


def _session_id_shape(value: str) -> str:
    """Session ids become file names: a record holding anything but a UUID is refused."""
    if not is_session_id(value):
        raise ValueError(f"{value[:80]!r} is not a Claude Code session id (a UUID)")
    return value


SessionId = Annotated[str, AfterValidator(_session_id_shape)]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_operation_id(now: datetime | None = None) -> str:
    """Sortable by creation time: `<UTC yyyymmddTHHMMSSZ>-<8 hex>`."""
    return f"{(now or utcnow()):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


class OperationKind(StrEnum):
    rebuild = "rebuild"
    rollback_of = "rollback-of"
    #: Restart the target onto the session it runs (`--resume` of the same id): Claude Code
    #: loads MCP servers, hooks and settings added since it started. No candidate is written.
    reload = "reload"


class Transition(BaseModel):
    model_config = ConfigDict(frozen=True)

    from_status: OperationStatus
    to_status: OperationStatus
    at: datetime
    note: str = ""


class HookFacts(BaseModel):
    """What a Stop hook reported, after it was checked (paths resolved)."""

    model_config = ConfigDict(frozen=True)

    session_id: SessionId
    transcript_path: str
    cwd: str = ""
    received_at: datetime


class Operation(BaseModel):
    """One rebuild (and its possible rollback): ids, digests, paths, outcome, history."""

    model_config = ConfigDict(extra="forbid")

    operation_id: str
    kind: OperationKind = OperationKind.rebuild
    status: OperationStatus = OperationStatus.pending
    created_at: datetime
    updated_at: datetime
    reason: str
    requested_by: str = "cli"

    hook: HookFacts | None = None
    rollback_hook: HookFacts | None = None

    source_path: str | None = None
    source_session_id: SessionId | None = None
    source_sha256: str | None = None
    source_size: int | None = None
    backup_path: str | None = None
    startup_sha256: str | None = None
    stats: dict[str, JsonValue] = Field(default_factory=dict)
    dirty_at_prepare: dict[str, JsonValue] = Field(default_factory=dict)

    new_session_id: SessionId | None = None
    candidate_path: str | None = None
    candidate_sha256: str | None = None
    manifest_path: str | None = None
    manifest_summary: dict[str, int] = Field(default_factory=dict)
    verification: Verification | None = None

    identity_before: Identity | None = None
    identity_after: Identity | None = None
    base_reports_session: bool = False
    # The session a switch was started for and not yet settled: what recovery must finish.
    switch_target: SessionId | None = None
    resume_argv: list[str] | None = None
    rollback_argv: list[str] | None = None

    error: str = ""
    session_conflict: bool = False
    rollback_ok: bool | None = None
    history: list[Transition] = Field(default_factory=list)

    @field_validator("operation_id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not OPERATION_ID.fullmatch(value):  # a ValueError: pydantic reports it as invalid
            raise ValueError(f"{value[:80]!r} is not an operation id")
        return value

    @property
    def settled(self) -> bool:
        return self.status in SETTLED

    @property
    def switched(self) -> bool:
        """Whether this operation ever reached the switch."""
        return any(step.to_status is OperationStatus.activating for step in self.history)

    @property
    def is_reload(self) -> bool:
        return self.kind is OperationKind.reload

    @property
    def switched_session(self) -> bool:
        """Whether this operation switched the target to another session (a rebuild that
        reached the switch; a reload resumes the session that ran)."""
        return self.switched and not self.is_reload
