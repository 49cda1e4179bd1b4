"""The outputs of the actions that are more than one engine value, and the MCP tools' own
results (what the model reads: ids, states and the next step; never conversation text)."""

from __future__ import annotations

from pydantic import BaseModel

from ..candidate.verifier import Verification
from ..operations.model import Operation, OperationStatus
from ..operations.store import StrayFile


class Found(BaseModel):
    """`status`: the operation asked for (None: there is none yet) and the files in
    operations/ that are not records."""

    operation: Operation | None
    skipped: list[StrayFile]


class History(BaseModel):
    """`history`: every operation, and the files in operations/ that are not records."""

    operations: list[Operation]
    skipped: list[StrayFile]


class Waited(BaseModel):
    """`wait`: the operation waited for (None: nothing was in flight), whether the wait ran
    out first, and whether it settled without doing what was asked."""

    operation: Operation | None
    timed_out: bool
    failed: bool
    timeout: float


class StartFailed(BaseModel):
    """`start-failed`: the operation switching back (None: nothing changed, and why)."""

    operation: Operation | None
    why: str


class CandidateSummary(BaseModel):
    """`candidate`: the rebuilt session written and verified, with the plan's counts."""

    new_session_id: str
    candidate_path: str
    manifest_path: str
    candidate_sha256: str
    verification: Verification
    source_path: str
    source_sha256: str
    source_session_id: str
    source_turns: int
    selected_turns: int
    open_tail_turns: int
    dropped_oldest_turns: int
    source_speech_items: int
    carried_speech_items: int
    estimated_tokens: int
    startup_frozen: bool
    resume_hint: str


class StatusResult(BaseModel):
    """An operation's record (ids, states, digests, counts; never conversation text)."""

    found: bool
    operation: Operation | None


class OperationResult(BaseModel):
    operation_id: str
    status: OperationStatus
    joined_existing: bool = False
    next_step: str
