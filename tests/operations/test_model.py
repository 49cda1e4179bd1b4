"""The state machine: exactly the spec's transitions; every other one refused by name."""

from __future__ import annotations

import itertools

import pytest

from kael_thread_rebuild.errors import KaelError
from kael_thread_rebuild.operations.model import (
    TRANSITIONS,
    IllegalTransition,
    Operation,
    OperationNotFound,
    OperationStatus,
    new_operation_id,
    require_operation_id,
    require_transition,
    utcnow,
)
from kael_thread_rebuild.operations.store import OperationStore

S = OperationStatus

SPEC = {
    (S.pending, S.scheduled), (S.pending, S.cancelled), (S.pending, S.failed),
    (S.scheduled, S.running), (S.scheduled, S.failed),
    (S.scheduled, S.cancelled),  # an addition: CANCEL after the Stop, before the worker
    # Another: with admin_confirm_minutes, a request awaits the admin's confirm, or expires;
    # a rollback request too, then goes on to rollback_pending or back to activated.
    (S.awaiting_confirmation, S.pending), (S.awaiting_confirmation, S.cancelled),
    (S.activated, S.awaiting_confirmation), (S.awaiting_confirmation, S.rollback_pending),
    (S.awaiting_confirmation, S.activated),
    (S.running, S.verifying), (S.running, S.failed),
    (S.verifying, S.activating), (S.verifying, S.failed),
    (S.activating, S.activated), (S.activating, S.rolled_back), (S.activating, S.failed),
    (S.activated, S.rollback_pending),
    (S.rollback_pending, S.rollback_scheduled), (S.rollback_pending, S.failed),
    (S.rollback_scheduled, S.rolled_back), (S.rollback_scheduled, S.failed),
}
ALL_PAIRS = list(itertools.product(S, S))


def test_table_is_the_spec() -> None:
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == SPEC
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("current", "wanted"), [p for p in ALL_PAIRS if p not in SPEC])
def test_illegal_transition_refused_by_name(current: S, wanted: S) -> None:
    with pytest.raises(IllegalTransition) as caught:
        require_transition("20260101T000000Z-0000abcd", current, wanted)
    message = str(caught.value)
    assert f"{current.value} -> {wanted.value}" in message
    assert isinstance(caught.value, KaelError)


def _op_in(store: OperationStore, path: list[S], created: S = S.pending) -> Operation:
    now = utcnow()
    op = store.create(Operation(operation_id=new_operation_id(now), created_at=now,
                                updated_at=now, reason="r", status=created))
    for status in path:
        op = store.transition(op.operation_id, status, "walk")
    return op


# The shortest legal walk from pending to each state (awaiting_confirmation: created so).
WALK = {
    S.awaiting_confirmation: [],
    S.pending: [],
    S.scheduled: [S.scheduled],
    S.running: [S.scheduled, S.running],
    S.verifying: [S.scheduled, S.running, S.verifying],
    S.activating: [S.scheduled, S.running, S.verifying, S.activating],
    S.activated: [S.scheduled, S.running, S.verifying, S.activating, S.activated],
    S.rollback_pending: [S.scheduled, S.running, S.verifying, S.activating, S.activated,
                         S.rollback_pending],
    S.rollback_scheduled: [S.scheduled, S.running, S.verifying, S.activating, S.activated,
                           S.rollback_pending, S.rollback_scheduled],
    S.cancelled: [S.cancelled],
    S.failed: [S.failed],
    S.rolled_back: [S.scheduled, S.running, S.verifying, S.activating, S.rolled_back],
}


@pytest.mark.parametrize(("current", "wanted"), ALL_PAIRS)
def test_store_enforces_the_table(store: OperationStore, current: S, wanted: S) -> None:
    created = S.awaiting_confirmation if current is S.awaiting_confirmation else S.pending
    op = _op_in(store, WALK[current], created)
    if (current, wanted) in SPEC:
        moved = store.transition(op.operation_id, wanted, "ok")
        assert moved.status is wanted
        assert moved.history[-1].from_status is current
        assert moved.history[-1].to_status is wanted
    else:
        with pytest.raises(IllegalTransition, match=f"{current.value} -> {wanted.value}"):
            store.transition(op.operation_id, wanted, "nope")
        assert store.load(op.operation_id).status is current


@pytest.mark.parametrize("bad", ["../etc/passwd", "x", "20260101T000000Z-0000ABCD",
                                 "20260101T000000Z-0000abcd/../x", ""])
def test_operation_ids_are_checked(bad: str) -> None:
    with pytest.raises(OperationNotFound):
        require_operation_id(bad)


def test_generated_ids_sort_by_time() -> None:
    first = new_operation_id()
    assert require_operation_id(first) == first
