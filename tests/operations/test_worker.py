"""The worker: prepare, verify, compare-and-swap checks, switch, health, fall back, rollback."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from kael_thread_rebuild.candidate.verifier import Verification
from kael_thread_rebuild.candidate.writer import CandidateResult, write_candidate
from kael_thread_rebuild.config import Activation, Config
from kael_thread_rebuild.errors import Refused
from kael_thread_rebuild.operations import service, worker
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.service import failed
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import MANIFEST_SUFFIX, transcripts
from kael_thread_rebuild.plan import Plan
from tests.builder import SESSION

from .harness import SECRET, HarnessBase, leftovers, scheduled, stop_input, turn_ended

S = OperationStatus


def run(config: Config, store: OperationStore, base: HarnessBase, op: Operation,
        on_step: Callable[[str], None] | None = None) -> Operation:
    return worker.run_operation(config, store, base, op.operation_id, on_step)


def at(name: str, action: Callable[[], object]) -> Callable[[str], None]:
    def hook(step: str) -> None:
        if step == name:
            action()
    return hook


def assert_nothing_switched(config: Config, base: HarnessBase, op: Operation,
                            source_bytes: bytes, source: Path) -> None:
    assert base.switches() == []
    assert base.pointer() == SESSION
    assert source.read_bytes() == source_bytes
    assert op.new_session_id is not None
    assert not (config.project_dir / f"{op.new_session_id}.jsonl").exists()
    assert not (config.project_dir / f"{op.new_session_id}{MANIFEST_SUFFIX}").exists()
    assert leftovers(config.project_dir, config.state_dir) == []


def assert_candidate_kept_in_state(config: Config, op: Operation) -> None:
    """The unused candidate left project_dir (Claude Code's `/resume` lists every transcript
    there) for the operation's candidates dir, and the record says where."""
    kept = config.state_dir / "candidates" / op.operation_id
    assert op.candidate_path == str(kept / f"{op.new_session_id}.jsonl")
    assert op.manifest_path == str(kept / f"{op.new_session_id}{MANIFEST_SUFFIX}")
    assert sorted(p.name for p in config.project_dir.iterdir()) == [f"{SESSION}.jsonl"]
    for path in (Path(op.candidate_path), Path(op.manifest_path)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert SECRET in Path(op.candidate_path).read_text()  # the whole candidate, verbatim


def test_happy_path(config: Config, store: OperationStore, base: HarnessBase,
                    source: Path) -> None:
    before = source.read_bytes()
    steps: list[str] = []
    op = run(config, store, base, scheduled(config, base), steps.append)
    assert op.status is S.activated, op.error
    assert base.pointer() == op.new_session_id and base.switches() == [op.new_session_id]
    assert source.read_bytes() == before
    backup = Path(op.backup_path or "")
    assert backup.read_bytes() == before and stat.S_IMODE(backup.stat().st_mode) == 0o600
    candidate = Path(op.candidate_path or "")
    assert candidate.parent == config.project_dir
    assert stat.S_IMODE(candidate.stat().st_mode) == 0o600
    # The manifest moved beside the backup: the candidate now counts as a transcript.
    assert Path(op.manifest_path or "").parent == backup.parent
    assert candidate in transcripts(config.project_dir)
    assert op.verification is not None and op.verification.ok
    assert op.identity_before is not None and op.identity_after is not None
    assert op.identity_before != op.identity_after
    assert op.resume_argv == [op.new_session_id]
    assert op.stats["selected_turns"] == op.stats["source_turns"] == 3
    assert op.manifest_summary["carried_speech_items"] > 0
    assert isinstance(op.dirty_at_prepare["total_bytes"], int)
    assert op.dirty_at_prepare["total_bytes"] > 0
    assert [h.to_status for h in op.history] == [S.scheduled, S.running, S.verifying,
                                                  S.activating, S.activated]
    assert steps == ["to_running", "check_activation", "read_identity", "check_start",
                     "snapshot_transcripts",
                     "wait_stop_recorded", "backup", "plan", "wait_stable",
                     "reserve_candidate", "write_candidate", "to_verifying",
                     "verify", "check_source", "check_identity", "check_transcripts",
                     "to_activating", "switch", "health", "archive_manifest", "to_activated"]
    assert leftovers(config.project_dir, config.state_dir) == []


def test_records_hold_no_conversation_text(config: Config, store: OperationStore,
                                           base: HarnessBase, source: Path) -> None:
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.activated
    assert SECRET.encode() in source.read_bytes()
    assert SECRET.encode() in Path(op.candidate_path or "").read_bytes()
    for record in store.operations_dir.iterdir():
        assert SECRET.encode() not in record.read_bytes()
    assert SECRET not in Path(op.manifest_path or "").read_text()


def test_identity_changed_before_switch(config: Config, store: OperationStore,
                                        base: HarnessBase, source: Path) -> None:
    before = source.read_bytes()
    third = "5e55a1d0-0000-4000-8000-00000000000f"
    # Someone else points the target elsewhere between prepare and activate.
    hook = at("check_identity", lambda: base.path.write_text(third + "\n"))
    op = run(config, store, base, scheduled(config, base), hook)
    assert op.status is S.failed and op.session_conflict
    assert "the target changed since prepare" in op.error
    assert base.switches() == [] and base.pointer() == third
    base.path.write_text(SESSION + "\n")
    assert_nothing_switched(config, base, op, before, source)
    assert_candidate_kept_in_state(config, op)  # a refused operation's too


def test_newer_transcript_appeared(config: Config, store: OperationStore, base: HarnessBase,
                                   source: Path) -> None:
    before = source.read_bytes()
    newer = config.project_dir / "5e55a1d0-0000-4000-8000-00000000000e.jsonl"
    op = run(config, store, base, scheduled(config, base),
             at("check_transcripts", lambda: newer.write_text("{}\n")))
    assert op.status is S.failed and op.session_conflict
    assert newer.name in op.error
    assert_nothing_switched(config, base, op, before, source)


def test_other_transcript_written_since_prepare(config: Config, store: OperationStore,
                                                base: HarnessBase, source: Path) -> None:
    other = config.project_dir / "5e55a1d0-0000-4000-8000-00000000000d.jsonl"
    other.write_text("{}\n")
    before = source.read_bytes()
    op = run(config, store, base, scheduled(config, base),
             at("verify", lambda: other.open("a").write("{}\n")))
    assert op.status is S.failed and op.session_conflict and other.name in op.error
    assert_nothing_switched(config, base, op, before, source)


def test_source_changed_after_prepare(config: Config, store: OperationStore, base: HarnessBase,
                                      source: Path) -> None:
    line = orjson.dumps({"type": "user", "message": {"role": "user", "content": "late"}})

    def append() -> None:
        with source.open("ab") as handle:
            handle.write(line + b"\n")

    op = run(config, store, base, scheduled(config, base), at("check_source", append))
    assert op.status is S.failed and op.session_conflict
    assert "source transcript changed after prepare" in op.error
    assert_nothing_switched(config, base, op, source.read_bytes(), source)
    assert Path(op.backup_path or "").read_bytes() + line + b"\n" == source.read_bytes()


def test_transcript_that_never_settles(config: Config, store: OperationStore,
                                       base: HarnessBase, source: Path) -> None:
    config = config.model_copy(update={"stability_timeout_seconds": 0.2})

    def grow(step: str) -> None:
        if step in ("wait_stable", "backup"):
            with source.open("ab") as handle:
                handle.write(b'{"type":"cost-state"}\n')

    op = run(config, store, base, scheduled(config, base), grow)
    assert op.status is S.failed and not op.session_conflict
    assert "kept changing" in op.error or "did not stay unchanged" in op.error
    assert base.switches() == []


def test_transcript_settles_after_a_late_write(config: Config, store: OperationStore,
                                               base: HarnessBase, source: Path) -> None:
    writes = iter(range(2))

    def late(step: str) -> None:  # after the first copy, while it is planned
        if step == "plan" and next(writes, None) == 0:
            with source.open("ab") as handle:
                handle.write(b'{"type":"cost-state"}\n')

    steps: list[str] = []

    def record(step: str) -> None:
        steps.append(step)
        late(step)

    op = run(config, store, base, scheduled(config, base), record)
    assert op.status is S.activated, op.error
    assert steps.count("backup") == 2
    assert Path(op.backup_path or "").read_bytes() == source.read_bytes()


def test_blocked_plan(config: Config, store: OperationStore, base: HarnessBase,
                      source: Path) -> None:
    with source.open("ab") as handle:
        handle.write(b"{torn json line\n")
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.failed and not op.session_conflict
    assert op.error.startswith("the plan is blocked: 1 unreadable line")
    assert op.new_session_id is None and base.switches() == []
    assert leftovers(config.project_dir, config.state_dir) == []


@pytest.mark.parametrize(("settings", "reason"), [
    ({"poison_pattern": "kingfisher|answer", "poison_threshold": 2}, "poisoned context: "),
    ({"carry_max_tokens": 5000, "carry_overflow": "block"}, "over budget: "),
])
def test_poisoned_or_over_budget_plan_is_refused(settings: dict[str, object], reason: str,
                                                 config: Config, store: OperationStore,
                                                 base: HarnessBase, source: Path) -> None:
    if "carry_max_tokens" in settings:
        settings = {**settings, "token_divisor": 0.01}  # the small conversation weighs a lot
    config = Config.model_validate({**config.model_dump(), **settings})
    before = source.read_bytes()
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.failed and not op.session_conflict
    assert op.error.startswith(f"the plan is blocked: {reason}"), op.error
    assert op.new_session_id is None and base.switches() == []
    assert base.pointer() == SESSION and source.read_bytes() == before
    assert leftovers(config.project_dir, config.state_dir) == []


def test_failed_verification_moves_the_candidate_out(config: Config, store: OperationStore,
                                                   base: HarnessBase, source: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def unverified(plan: Plan, output_dir: Path, config: Config,
                   session_id: str | None = None) -> CandidateResult:
        result = write_candidate(plan, output_dir, config, session_id=session_id)
        result.verification = Verification(ok=False, errors=["item 3 digest differs"],
                                           records_checked=1)
        return result

    monkeypatch.setattr(worker, "write_candidate", unverified)
    before = source.read_bytes()
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.failed and not op.session_conflict
    assert "failed verification: item 3 digest differs" in op.error
    assert_nothing_switched(config, base, op, before, source)
    assert_candidate_kept_in_state(config, op)


def test_unreadable_target_at_prepare(config: Config, store: OperationStore, base: HarnessBase,
                                      source: Path) -> None:
    op = scheduled(config, base)
    base.path.unlink()
    op = run(config, store, base, op)
    assert op.status is S.failed and "identity cannot be read" in op.error
    assert base.switches() == []


def test_new_session_dies_then_old_resumed(config: Config, store: OperationStore,
                                           base: HarnessBase, source: Path) -> None:
    op = scheduled(config, base)
    base.set("only-alive", SESSION)  # the resume command of the new session exits at once
    op = run(config, store, base, op)
    assert op.status is S.rolled_back and op.rollback_ok is True
    assert "not alive after switching" in op.error and "old session was resumed" in op.error
    assert base.switches() == [op.new_session_id, SESSION] and base.pointer() == SESSION
    assert op.rollback_argv == [SESSION]
    # The candidate is kept whole (it may hold what the new process wrote), out of /resume.
    assert_candidate_kept_in_state(config, op)


def test_new_session_never_reports_itself(config: Config, store: OperationStore,
                                          base: HarnessBase, source: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    op = scheduled(config, base)
    monkeypatch.setattr(HarnessBase, "running_session", lambda self: SESSION)
    op = run(config, store, base, op)
    assert op.status is S.rolled_back
    assert f"reports {SESSION}" in op.error
    assert base.pointer() == SESSION


def test_base_that_cannot_report_needs_only_to_stay_alive(config: Config,
                                                          store: OperationStore,
                                                          base: HarnessBase,
                                                          source: Path) -> None:
    base.set("no-report")
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.activated and not op.base_reports_session


def test_new_dies_and_old_cannot_be_resumed(config: Config, store: OperationStore,
                                            base: HarnessBase, source: Path) -> None:
    op = scheduled(config, base)
    base.set("only-alive")
    base.set("switch-fails", SESSION)
    op = run(config, store, base, op)
    assert op.status is S.failed and op.rollback_ok is False
    assert "not alive after switching" in op.error
    assert f"resuming the old session failed too: switching to session {SESSION} failed" \
        in op.error
    assert base.switches() == [op.new_session_id, SESSION]
    # The pointer still names the new session (its runner would resume it): it stays.
    assert base.pointer() == op.new_session_id
    assert op.candidate_path == str(config.project_dir / f"{op.new_session_id}.jsonl")
    assert Path(op.candidate_path).is_file()


def test_switch_to_new_fails(config: Config, store: OperationStore, base: HarnessBase,
                             source: Path) -> None:
    op = scheduled(config, base)
    base.set("switch-only", SESSION)
    op = run(config, store, base, op)
    # The refused switch changed nothing: no switch back, no failure of one.
    assert op.status is S.failed and op.rollback_ok is None
    new = op.new_session_id
    assert op.error == (f"switching to session {new} failed: cannot switch to {new}; nothing "
                        f"was switched: the old session {SESSION} still runs")
    assert op.history[-1].note == "nothing switched"
    assert base.switches() == [new]
    assert op.resume_argv is None and base.pointer() == SESSION
    assert_candidate_kept_in_state(config, op)


def _activated(config: Config, store: OperationStore, base: HarnessBase) -> Operation:
    op = run(config, store, base, scheduled(config, base))
    assert op.status is S.activated
    return op


def _rollback_scheduled(config: Config, op: Operation, base: HarnessBase) -> Operation:
    service.rollback_request(config, op.operation_id, "ROLLBACK")
    turn_ended(config, op.new_session_id or "")
    moved = service.record_stop(config, stop_input(config, session=op.new_session_id or ""),
                                base)
    assert moved is not None and moved.status is S.rollback_scheduled, moved
    return moved


def test_rollback_on_request(config: Config, store: OperationStore, base: HarnessBase,
                             source: Path) -> None:
    before = source.read_bytes()
    op = _rollback_scheduled(config, _activated(config, store, base), base)
    steps: list[str] = []
    op = run(config, store, base, op, steps.append)
    assert op.status is S.rolled_back and op.rollback_ok is True, op.error
    assert base.pointer() == SESSION and op.rollback_argv == [SESSION]
    assert steps == ["wait_stop_recorded", "wait_stable", "check_identity", "switch_back",
                     "health_old", "to_rolled_back"]
    assert source.read_bytes() == before


def test_rollback_refused_when_target_changed(config: Config, store: OperationStore,
                                              base: HarnessBase, source: Path) -> None:
    op = _rollback_scheduled(config, _activated(config, store, base), base)
    third = "5e55a1d0-0000-4000-8000-00000000000f"
    op = run(config, store, base, op,
             at("check_identity", lambda: base.path.write_text(third + "\n")))
    assert op.status is S.failed and op.session_conflict
    assert "rollback not performed" in op.error
    assert base.pointer() == third and base.switches() == [op.new_session_id]


def test_rollback_whose_old_session_dies_resumes_the_new(config: Config, store: OperationStore,
                                                         base: HarnessBase,
                                                         source: Path) -> None:
    op = _rollback_scheduled(config, _activated(config, store, base), base)
    base.set("dead", SESSION)
    op = run(config, store, base, op)
    assert op.status is S.failed and op.rollback_ok is False
    assert "the rebuilt session was resumed" in op.error
    assert base.pointer() == op.new_session_id


def test_only_runnable_operations_run(config: Config, store: OperationStore,
                                      base: HarnessBase, source: Path) -> None:
    op = service.request(config, "r", "REBUILD")
    with pytest.raises(Exception, match="only scheduled"):
        run(config, store, base, op)


def test_a_failed_start_reported_by_the_runner_brings_the_old_session_back(
        config: Config, store: OperationStore, base: HarnessBase, source: Path) -> None:
    op = _activated(config, store, base)
    new = op.new_session_id or ""
    changed, why = service.start_failed(config, new, "claude exited\nwith status 127")
    assert changed is not None and why == "", why
    assert changed.status is S.rollback_scheduled
    assert changed.error == f"the runner could not start session {new}: claude exited with " \
                            "status 127"
    steps: list[str] = []
    op = run(config, store, base, changed, steps.append)
    assert op.status is S.rolled_back and op.rollback_ok is True, op.error
    assert op.error == changed.error + "; the old session was resumed"
    assert steps == ["check_identity", "switch_back", "health_old", "move_candidate",
                     "to_rolled_back"]
    assert base.pointer() == SESSION and op.rollback_argv == [SESSION]
    kept = config.state_dir / "candidates" / op.operation_id / f"{new}.jsonl"
    assert op.candidate_path == str(kept) and kept.is_file()
    assert sorted(p.name for p in config.project_dir.iterdir()) == [f"{SESSION}.jsonl"]
    assert failed(op)  # `wait` exits 1: the rebuild fell back


def test_a_failed_start_of_a_session_that_ran_changes_nothing(
        config: Config, store: OperationStore, base: HarnessBase, source: Path) -> None:
    op = _activated(config, store, base)
    new = op.new_session_id or ""
    other = "5e55a1d0-0000-4000-8000-00000000000f"
    assert service.start_failed(config, other, "x") == (
        None, f"no activated rebuild switched to session {other} last")
    turn_ended(config, new)  # a turn of the new session: going back would lose it
    assert service.start_failed(config, new, "x") == (
        None, f"session {new} has run since the switch (its transcript changed)")
    assert store.load(op.operation_id).status is S.activated and base.pointer() == new
    with pytest.raises(Refused, match="only the pointer base's runner"):
        service.start_failed(config.model_copy(update={"activation": Activation.tmux}), new, "x")
