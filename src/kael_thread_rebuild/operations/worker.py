"""The slow path of an operation, run by the daemon outside the lock and outside Claude's process
tree: prepare, verify, check, switch, confirm, fall back; and recovery of what a dead worker left.

Every named step and every state change first calls `on_step(name)` (fault-injection tests kill
the worker there). Step names, in order of a rebuild: to_running, check_activation,
read_identity, check_start, snapshot_transcripts, wait_stop_recorded, backup, plan, wait_stable
(the last three repeat if the file moved meanwhile; no plan of a copy made while it moved),
reserve_candidate, write_candidate, to_verifying, verify, check_source, check_identity,
check_transcripts, to_activating, switch, health, archive_manifest, to_activated. Falling back:
switch_back, health_old, move_candidate, to_rolled_back | to_failed. Refusing before the switch:
move_candidate, to_failed. A rollback: (wait_stop_recorded, wait_stable after its Stop,)
check_identity, switch_back, health_old, (move_candidate after a failed start,) to_rolled_back
(failing: switch, health, to_failed). A reload (the target restarted onto the session it runs,
so that Claude Code loads what was added since it started): to_running, check_activation,
read_identity, check_start, snapshot_transcripts, wait_stop_recorded, wait_stable, to_verifying,
check_source, check_identity, check_transcripts, to_activating, switch, health, to_activated;
falling back as a rebuild does, onto that same session (switch_back, health_old).

Inside a switch the base names its own steps between changing something and changing what the
target runs (the systemd base: `restart`, its pointer written and the unit not yet restarted;
tmux: `respawn`, the pane kept and not yet respawned). A switch that changed nothing the target
runs (its identity is the one it had before: the pointer could not be written, the restart was
not authorised) is given up (`abandon_switch`: the base undoes what it did change) and recorded
as what it is: nothing switched, the session that ran still runs. Recovery does the same for a
switch interrupted there.

A candidate that was not used leaves the project dir (Claude Code's `/resume` lists every
transcript there) for `<state_dir>/candidates/<operation id>/` on every path that fails, unless
the target reports running it; its record says where it is. Every path built from a record
field goes through `files.confined`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..candidate.writer import CandidateResult, write_candidate
from ..config import Config
from ..errors import KaelError, Refused, StorageError
from ..fsutil import atomic_copy, fsync_dir
from ..paths import MANIFEST_SUFFIX
from ..plan import Plan, build_plan
from ..plan_report import PlanReport
from ..switching.base import Identity, StepHook, SwitchBase
from .confirmation import unconfirmed
from .files import (
    STOP_SUMMARY,
    FileSample,
    TranscriptSnapshot,
    changed_transcripts,
    confined,
    copy_sampled,
    move_private,
    remove_with_temps,
    sha256_file,
    snapshot_transcripts,
    stop_summary_written,
    wait_for_file,
    wait_stable,
)
from .model import Operation, OperationStatus
from .store import OperationStore
from .switchover import (
    activation_problem,
    health_problem,
    read_identity,
    read_running,
    same_target,
    start_problem,
    stopped_from_outside,
    switch,
    switch_done,
)

#: How often the worker looks for the Stop's record in the transcript (the switch waits on it).
STOP_POLL_SECONDS = 0.05

# (switch step, health step, record field for the argv) per direction.
_TO_NEW = ("switch", "health", "resume_argv")
_TO_OLD = ("switch_back", "health_old", "rollback_argv")
_BEFORE_SWITCH = frozenset({OperationStatus.pending, OperationStatus.scheduled,
                            OperationStatus.running, OperationStatus.verifying})


class _Abort(Exception):
    """Stop preparing: nothing was switched; REASON is the operation's error."""

    def __init__(self, reason: str, conflict: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.conflict = conflict


def run_operation(config: Config, store: OperationStore, base: SwitchBase, operation_id: str,
                  on_step: StepHook | None = None) -> Operation:
    """Drive a scheduled (or rollback_scheduled) operation to a settled state."""
    op = store.load(operation_id)
    refused = unconfirmed(config, op)
    if refused:
        return store.transition(operation_id, OperationStatus.failed, "not confirmed",
                                error=refused)
    run = _Run(config, store, base, op, on_step)
    if op.status is OperationStatus.scheduled:
        return run.reload() if op.is_reload else run.rebuild()
    if op.status is OperationStatus.rollback_scheduled:
        return run.rollback()
    raise Refused(f"operation {operation_id} is {op.status.value}; only scheduled and "
                  "rollback_scheduled operations run")


def recover(config: Config, store: OperationStore, base: SwitchBase,
            on_step: StepHook | None = None) -> list[Operation]:
    """Settle every operation a dead worker (or a restart) left in flight, recording the truth.

    Call it only when no worker runs (daemon start). Returns the operations it settled.
    """
    settled = [_Run(config, store, base, op, on_step).recover() for op in store.unsettled()]
    store.sweep_temp_files()
    return settled


class _Run:
    def __init__(self, config: Config, store: OperationStore, base: SwitchBase, op: Operation,
                 on_step: StepHook | None) -> None:
        self.config = config
        self.store = store
        self.base = base
        self.op = op
        self.on_step = on_step
        self.snapshot: TranscriptSnapshot = {}

    # -- plumbing ------------------------------------------------------------------------------

    def step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)

    def update(self, **changes: Any) -> None:
        self.op = self.store.update(self.op.operation_id, **changes)

    def move(self, to: OperationStatus, note: str, **changes: Any) -> Operation:
        self.step(f"to_{to.value}")
        self.op = self.store.transition(self.op.operation_id, to, note, **changes)
        return self.op

    @property
    def old_id(self) -> str:
        return _need(self.op.source_session_id, "the source session id")

    @property
    def new_id(self) -> str:
        return _need(self.op.new_session_id, "the new session id")

    def in_project(self, name: str) -> Path:
        return confined(self.config.project_dir, name)

    # -- a rebuild -----------------------------------------------------------------------------

    def rebuild(self) -> Operation:
        return self.prepared_and_activated(self.prepare)

    def prepared_and_activated(self, prepare: Callable[[], None]) -> Operation:
        self.move(OperationStatus.running, "worker started")
        try:
            prepare()
        except _Abort as abort:
            return self.fail_unswitched(abort.reason, conflict=abort.conflict)
        except KaelError as exc:
            return self.fail_unswitched(str(exc))
        except Exception as exc:
            self.fail_unswitched(f"internal error while preparing: {type(exc).__name__}: {exc}")
            raise
        return self.activate()

    def prepare(self) -> None:
        source = self.in_project(_need(self.op.source_path, "the source transcript path"))
        self.check_target()
        self.step("snapshot_transcripts")
        self.snapshot = snapshot_transcripts(self.config.project_dir)
        backup = confined(self.store.backup_dir(self.op.operation_id), f"{self.old_id}.jsonl")
        copy, plan = self.settle_copy_and_plan(source, backup)
        self.update(backup_path=str(backup), source_sha256=copy.sha256, source_size=copy.size)
        if plan.report.blocked_reason:
            raise _Abort(f"the plan is blocked: {plan.report.blocked_reason}")
        if plan.report.source_sha256 != copy.sha256:
            raise _Abort("the backup changed while it was planned")
        self.update(stats=_stats(plan.report), startup_sha256=plan.report.startup_sha256,
                    dirty_at_prepare=plan.report.dirty.model_dump(mode="json"))

        self.step("reserve_candidate")
        new_id = str(uuid.uuid4())
        candidate = self.in_project(f"{new_id}.jsonl")
        # Recorded before writing, so that recovery knows what to move out.
        self.update(new_session_id=new_id, candidate_path=str(candidate),
                    manifest_path=str(self.in_project(f"{new_id}{MANIFEST_SUFFIX}")))
        self.step("write_candidate")
        result = write_candidate(plan, self.config.project_dir, self.config, session_id=new_id)
        self.move(OperationStatus.verifying, "candidate written",
                  candidate_sha256=result.candidate_sha256, manifest_summary=_summary(result),
                  verification=result.verification)

        self.step("verify")
        if not result.verification.ok:
            errors = result.verification.errors
            raise _Abort(f"the candidate failed verification: {errors[0] if errors else '?'} "
                         f"({len(errors)} problem(s))")
        self.require_unchanged_since_prepare(source, candidate)

    def check_target(self) -> None:
        """The switch can act on the target, which runs the Claude Code of the Stop, and the
        command that resumes its session starts; the identity is recorded (identity_before)."""
        self.step("check_activation")
        problem = activation_problem(self.base)
        if problem:
            raise _Abort(f"the switch could not act on the target: {problem}")
        self.step("read_identity")
        try:
            identity = self.base.identity()
        except KaelError as exc:
            raise _Abort(f"the target's identity cannot be read: {exc}") from None
        self.update(identity_before=identity,
                    base_reports_session=read_running(self.base) is not None)
        self.require_claude_of_stop(identity)
        self.step("check_start")
        problem = start_problem(self.base, self.old_id)
        if problem:
            raise _Abort(f"resume_command cannot be started: {problem}")

    def prepare_reload(self) -> None:
        """A reload's prepare: the target runs the session of the Stop and its command starts;
        the turn is written and the transcript stable (a restart must not cut a word)."""
        source = self.in_project(_need(self.op.source_path, "the source transcript path"))
        self.check_target()
        self.step("snapshot_transcripts")
        self.snapshot = snapshot_transcripts(self.config.project_dir)
        try:
            self.wait_stop_recorded(source)
            self.step("wait_stable")
            stable = wait_stable(source, self.config.stability_samples,
                                 self.config.stability_interval_seconds,
                                 self.config.stability_timeout_seconds)
        except OSError as exc:
            raise _Abort(f"the transcript {source} cannot be read: {exc.strerror or exc}") \
                from None
        self.move(OperationStatus.verifying, "nothing to build: the session that runs is resumed",
                  new_session_id=self.old_id, source_sha256=stable.sha256,
                  source_size=stable.size)
        self.require_unchanged_since_prepare(source, source)

    def require_claude_of_stop(self, identity: Identity) -> None:
        """The target must run the Claude Code process that sent the Stop: a pane or unit that
        runs no registered Claude Code, or another session, is never switched ("nothing is
        registered" is not "cannot tell")."""
        running = identity.running_session_id
        if running == self.old_id:
            return
        if running is None:
            raise _Abort(f"no Claude Code process of session {self.old_id} runs in the target "
                         f"({_identity_text(identity)}): it was quit or replaced", conflict=True)
        raise _Abort(f"the target runs session {running}, not session {self.old_id} that sent "
                     "the Stop", conflict=True)

    def settle_copy_and_plan(self, source: Path, backup: Path) -> tuple[FileSample, Plan]:
        """Wait until Claude Code has finished the Stop, copy the transcript and plan the copy,
        and keep both once the transcript proves stable: the copy is the first of the stability
        samples, and the plan is built while the next one is due (the downtime of a switch runs
        from the Stop); all again if the transcript moved meanwhile."""
        timeout = self.config.stability_timeout_seconds
        try:
            self.wait_stop_recorded(source)
            deadline = time.monotonic() + timeout
            while True:
                self.step("backup")
                copy, taken = copy_sampled(source, backup)
                plan = self.plan_copy(backup) if copy.sha256 else None
                self.step("wait_stable")
                stable = wait_stable(source, self.config.stability_samples,
                                     self.config.stability_interval_seconds,
                                     max(deadline - time.monotonic(), 0.0),
                                     first=(copy, taken))
                if plan is not None and stable == copy:
                    return copy, plan
                if time.monotonic() >= deadline:
                    raise _Abort(f"the transcript kept changing for {timeout:g} s")
        except StorageError as exc:  # the backup could not be written: not the transcript's fault
            raise _Abort(str(exc)) from None
        except OSError as exc:
            raise _Abort(f"the transcript {source} cannot be read: {exc.strerror or exc}") \
                from None

    def plan_copy(self, backup: Path) -> Plan:
        self.step("plan")
        return build_plan(self.config, backup)  # only the copy is read from here on

    def wait_stop_recorded(self, source: Path) -> None:
        """The worker starts as soon as the hook recorded the Stop, but Claude Code writes the
        Stop's `stop_hook_summary` (and `turn_duration`) only once the hook process returned,
        which a slow hook (`docker exec` under load) delays by seconds: stability samples taken
        before that pass, and the source then changes under the prepared candidate. So first
        wait for the file (a new session's may appear only after its first Stop) and for the
        summary record after the turn's last words, bounded by `stop_settle_timeout_seconds`."""
        self.step("wait_stop_recorded")
        timeout = self.config.stop_settle_timeout_seconds
        # A stat and a read of the file's tail: looked at often, since the switch waits on it.
        interval = min(STOP_POLL_SECONDS, self.config.stability_interval_seconds)
        deadline = time.monotonic() + timeout
        if not wait_for_file(source, timeout, interval):
            raise _Abort(f"the transcript {source} named by the Stop did not appear within "
                         f"{timeout:g} s (stop_settle_timeout_seconds)")
        while not stop_summary_written(source):
            if time.monotonic() >= deadline:
                raise _Abort(f"Claude Code did not record the Stop in {source.name} within "
                             f"{timeout:g} s (stop_settle_timeout_seconds): no "
                             f"`{STOP_SUMMARY}` record after the turn's last message, so a "
                             "Stop hook is still running or the session went on")
            time.sleep(interval)

    def require_unchanged_since_prepare(self, source: Path, candidate: Path) -> None:
        self.step("check_source")
        try:
            digest = sha256_file(source)
        except OSError:
            digest = ""
        if digest != self.op.source_sha256:
            raise _Abort("the source transcript changed after prepare", conflict=True)
        self.step("check_identity")
        now = read_identity(self.base)
        if not same_target(now, self.op.identity_before):
            before = _identity_text(self.op.identity_before)
            raise _Abort(f"the target changed since prepare ({before} -> {_identity_text(now)})",
                         conflict=True)
        self.step("check_transcripts")
        changed = changed_transcripts(self.snapshot, snapshot_transcripts(self.config.project_dir),
                                      {source.name, candidate.name})
        if changed:
            raise _Abort(f"transcript {changed[0]} changed since prepare: another session is "
                         "active in project_dir", conflict=True)

    def activate(self) -> Operation:
        self.move(OperationStatus.activating, "checks passed")
        problem = self.bring_up(self.new_id, _TO_NEW)
        if not problem:
            return self.settle_activated("the new session is healthy")
        if self.unswitched(self.op.identity_before):
            return self.keep_old(problem)
        stopped = stopped_from_outside(self.base)
        if stopped:
            return self.keep_stopped(problem, stopped, self.old_id)
        return self.restore_old(problem)

    # -- a reload ------------------------------------------------------------------------------

    def reload(self) -> Operation:
        """The target restarted onto the session it runs, checked and fallen back from as a
        switch is (to that same session, resumed again)."""
        return self.prepared_and_activated(self.prepare_reload)

    # -- a rollback ----------------------------------------------------------------------------

    def rollback(self) -> Operation:
        # As for a rebuild: let Claude Code finish writing its turn before the switch ends it.
        hook = self.op.rollback_hook
        if hook is not None:
            try:
                self.wait_stop_recorded(self.in_project(hook.transcript_path))
                self.step("wait_stable")
                wait_stable(self.in_project(hook.transcript_path), self.config.stability_samples,
                            self.config.stability_interval_seconds,
                            self.config.stability_timeout_seconds)
            except (KaelError, OSError, _Abort) as exc:
                return self.move(OperationStatus.failed, "rollback refused",
                                 error=f"rollback not performed: {exc}; the rebuilt session "
                                 "still runs")
        self.step("check_identity")
        if not same_target(read_identity(self.base), self.op.identity_after):
            return self.move(OperationStatus.failed, "rollback refused", session_conflict=True,
                             error="rollback not performed: the target changed since activation; "
                                   "the rebuilt session still runs")
        problem = self.bring_up(self.old_id, _TO_OLD)
        if problem and self.unswitched(self.op.identity_after):
            return self.keep_new(problem)
        stopped = stopped_from_outside(self.base) if problem else ""
        if stopped:
            return self.keep_stopped(f"rollback not performed: {problem}", stopped, self.new_id)
        if problem:
            return self.restore_new(f"rollback failed: {problem}")
        if self.op.error:  # the pointer runner could not start the new session: it never ran
            self.step("move_candidate")
            return self.move(OperationStatus.rolled_back, "returned to the old session",
                             rollback_ok=True,
                             error=f"{self.op.error}; the old session was resumed",
                             identity_after=read_identity(self.base), switch_target=None,
                             candidate_path=self.move_candidate_out()["candidate_path"])
        return self.move(OperationStatus.rolled_back, "rolled back on request", rollback_ok=True,
                         identity_after=read_identity(self.base), switch_target=None)

    # -- shared endings ------------------------------------------------------------------------

    def bring_up(self, session_id: str, direction: tuple[str, str, str],
                 known: Identity | None = None) -> str:
        """Switch to SESSION_ID and check its health; empty when healthy.

        With KNOWN (recovery), a target that already runs the session (it says so, or shows the
        identity it had when it ran it) is only checked, not switched again.
        """
        switch_step, health_step, argv_field = direction
        already = known is not None and (read_running(self.base) == session_id
                                         or same_target(read_identity(self.base), known))
        if not already:
            self.step(switch_step)
            self.update(switch_target=session_id)
            argv, problem = switch(self.base, session_id, self.step)
            if argv is not None:
                self.update(**{argv_field: argv})
            if problem:
                return problem
        self.step(health_step)
        problem = health_problem(self.base, session_id, self.config, self.op.base_reports_session)
        if not problem:
            switch_done(self.base)
        return problem

    def settle_activated(self, note: str) -> Operation:
        if self.op.is_reload:
            return self.move(OperationStatus.activated, "the reloaded session is healthy",
                             identity_after=read_identity(self.base), switch_target=None)
        self.step("archive_manifest")
        manifest = self.archive_manifest()
        return self.move(OperationStatus.activated, note, identity_after=read_identity(self.base),
                         switch_target=None, manifest_path=str(manifest))

    def restore_old(self, problem: str, known: Identity | None = None) -> Operation:
        again = self.bring_up(self.old_id, _TO_OLD, known)
        identity = read_identity(self.base)
        if not again:
            self.step("move_candidate")
            return self.move(OperationStatus.rolled_back, "returned to the old session",
                             rollback_ok=True, error=f"{problem}; the old session was resumed",
                             identity_after=identity, switch_target=None,
                             **self.move_candidate_out())
        self.step("move_candidate")
        kept = {} if identity is not None and identity.running_session_id == self.new_id \
            else self.move_candidate_out()  # the target runs it: it is that session's transcript
        return self.move(OperationStatus.failed, "the old session did not come back",
                         rollback_ok=False,
                         error=f"{problem}; resuming the old session failed too: {again}",
                         identity_after=identity, switch_target=None, **kept)

    def restore_new(self, problem: str, known: Identity | None = None) -> Operation:
        again = self.bring_up(self.new_id, _TO_NEW, known)
        outcome = ("the rebuilt session was resumed" if not again
                   else f"resuming the rebuilt session failed too: {again}")
        return self.move(OperationStatus.failed, "rollback failed", rollback_ok=False,
                         error=f"{problem}; {outcome}", identity_after=read_identity(self.base),
                         switch_target=None)

    def unswitched(self, before: Identity | None) -> bool:
        """Whether the target still runs what it ran before the switch (same identity)."""
        return same_target(read_identity(self.base), before)

    def abandon_switch(self, running: str) -> str:
        """Undo what a switch changed short of what the target runs, so that its next start
        runs RUNNING again (the session it runs); the problem, empty when done."""
        self.step("abandon_switch")
        try:
            self.base.abandon_switch(running)
        except KaelError as exc:
            return f"undoing the switch failed: {exc}"
        return ""

    def keep_old(self, problem: str) -> Operation:
        """The switch to the new session changed nothing the target runs: the old session
        still runs, and nothing is switched back (a switch back that never had to happen is no
        failure)."""
        undo = self.abandon_switch(self.old_id)
        if undo:
            return self.restore_old(f"{problem}; {undo}")
        return self.fail_unswitched(f"{problem}; nothing was switched: the old session "
                                    f"{self.old_id} still runs")

    def keep_new(self, problem: str) -> Operation:
        """The rollback's switch changed nothing the target runs: the rebuilt session still
        runs."""
        undo = self.abandon_switch(self.new_id)
        if undo:
            return self.restore_new(f"rollback failed: {problem}; {undo}")
        return self.move(OperationStatus.failed, "rollback refused", switch_target=None,
                         error=f"rollback not performed: {problem}; nothing was switched: the "
                               f"rebuilt session {self.new_id} still runs")

    def keep_stopped(self, problem: str, stopped: str, before: str) -> Operation:
        """Someone stopped the target during the switch (an admin's `systemctl stop`): it is
        not started again; its next start resumes BEFORE, the session it ran before the switch
        (the old one for a rebuild, the rebuilt one for a rollback)."""
        undo = self.abandon_switch(before)
        which = "the old session" if before == self.old_id else "the rebuilt session"
        kept: dict[str, str | None] = {}
        if undo:
            after = f"its next start resumes the session it was switched to ({undo})"
        else:
            after = f"its next start resumes {which} {before}"
            if before == self.old_id:  # the candidate was never used: out of /resume
                self.step("move_candidate")
                kept = self.move_candidate_out()
        return self.move(OperationStatus.failed, "stopped from outside", switch_target=None,
                         error=f"{problem}; the target was stopped from outside during the "
                               f"switch ({stopped}): it is left stopped, not started again; "
                               f"{after}", identity_after=read_identity(self.base), **kept)

    def fail_unswitched(self, reason: str, conflict: bool = False) -> Operation:
        self.step("move_candidate")
        return self.move(OperationStatus.failed, "nothing switched", error=reason,
                         session_conflict=conflict, switch_target=None, **self.move_candidate_out())

    def move_candidate_out(self) -> dict[str, str | None]:
        """Move the candidate and its manifest out of project_dir into the operation's
        candidates dir; the record fields that say where they are now (None: no such file).

        A half-written temporary file is removed; a file that cannot be moved (the state dir's
        disk is full) is removed rather than left where `/resume` would list it.
        """
        new_id = self.op.new_session_id
        if not new_id or new_id == self.op.source_session_id:
            return {"candidate_path": None, "manifest_path": None}
        sources = [self.in_project(f"{new_id}.jsonl"),
                   self.in_project(f"{new_id}{MANIFEST_SUFFIX}")]
        kept_dir = confined(self.store.candidates_dir, self.op.operation_id)
        if any(path.exists() for path in sources):
            kept_dir = self.store.candidate_dir(self.op.operation_id)
        kept: list[str | None] = []
        for source in sources:
            dest = confined(kept_dir, source.name)
            if source.exists():
                try:
                    move_private(source, dest)
                except OSError:
                    remove_with_temps([source])
            kept.append(str(dest) if dest.exists() else None)
        remove_with_temps([path for path in sources if not path.exists()])
        return {"candidate_path": kept[0], "manifest_path": kept[1]}

    def archive_manifest(self) -> Path:
        """Move the manifest beside the backup: beside the candidate it marks a session that
        was never activated (`paths.is_candidate`)."""
        name = f"{self.new_id}{MANIFEST_SUFFIX}"
        source = self.in_project(name)
        dest = confined(self.store.backup_dir(self.op.operation_id), name)
        try:
            if source.exists():
                with source.open("rb") as handle:  # a million items: copied a chunk at a time
                    atomic_copy(handle, dest, 0o600)
                source.unlink()
                fsync_dir(source.parent)
        except OSError:
            return source  # the switch is done; the record says where the manifest stayed
        return dest

    # -- recovery ------------------------------------------------------------------------------

    def recover(self) -> Operation:
        self.name_backup()
        status = self.op.status
        if status in _BEFORE_SWITCH:
            return self.fail_unswitched(f"interrupted before switching: the operation was "
                                        f"{status.value} when the worker stopped")
        if status is OperationStatus.rollback_pending:
            return self.move(OperationStatus.failed, "recovered",
                             error="rollback not performed: interrupted while waiting for the "
                             "Stop; the rebuilt session still runs")
        if status is OperationStatus.activating:
            return self.recover_activating()
        if status is OperationStatus.rollback_scheduled:
            return self.recover_rollback()
        return self.op

    def name_backup(self) -> None:
        """A worker stopped between copying the transcript and recording the copy left a backup
        its record does not name: name it (it is a whole copy: written atomically)."""
        old = self.op.source_session_id
        if self.op.backup_path or not old:
            return
        folder = confined(self.store.backups_dir, self.op.operation_id)
        backup = confined(folder, f"{old}.jsonl")
        if backup.is_file() and not backup.is_symlink():
            self.update(backup_path=str(backup))

    def recover_activating(self) -> Operation:
        target, before = self.op.switch_target, self.op.identity_before
        unchanged = self.unswitched(before)
        if unchanged and target in (None, self.new_id):
            return self.keep_old("interrupted before switching")
        if target is None:
            return self.fail_unswitched("interrupted before switching, and the target no longer "
                                        "matches the one prepared against", conflict=True)
        if target == self.new_id:
            self.step("health")
            problem = health_problem(self.base, self.new_id, self.config,
                                     self.op.base_reports_session)
            if not problem:
                switch_done(self.base)
                return self.settle_activated("recovered: the new session runs")
            return self.restore_old(f"interrupted while switching, and the new session is not "
                                    f"healthy: {problem}")
        return self.restore_old("interrupted while returning to the old session", known=before)

    def recover_rollback(self) -> Operation:
        target, after = self.op.switch_target, self.op.identity_after
        unchanged = self.unswitched(after)
        if unchanged and target in (None, self.old_id):
            return self.keep_new("interrupted before switching")
        if target is None:
            return self.move(OperationStatus.failed, "recovered", session_conflict=True,
                             error="rollback not performed: the target changed since "
                                   "activation; the rebuilt session still runs")
        if target == self.old_id:
            problem = self.bring_up(self.old_id, _TO_OLD, self.op.identity_before)
            if not problem:
                return self.move(OperationStatus.rolled_back, "recovered: the old session runs",
                                 rollback_ok=True, identity_after=read_identity(self.base),
                                 switch_target=None)
            return self.restore_new(f"rollback interrupted, and the old session is not "
                                    f"healthy: {problem}")
        return self.restore_new("rollback interrupted while resuming the rebuilt session",
                                known=after)


def _need(value: str | None, what: str) -> str:
    if not value:
        raise _Abort(f"the operation record lacks {what}")
    return value


def _identity_text(identity: Identity | None) -> str:
    if identity is None:
        return "unreadable"
    return ", ".join(f"{key}={value}" for key, value in sorted(identity.token.items()))


def _stats(report: PlanReport) -> dict[str, JsonValue]:
    """The plan's numbers and maps of numbers: counts only, never text."""
    stats: dict[str, JsonValue] = {}
    for key, value in report.model_dump(mode="json").items():
        if isinstance(value, bool | int | float) or (
                isinstance(value, dict) and all(isinstance(v, int) for v in value.values())):
            stats[key] = value
    return stats


def _summary(result: CandidateResult) -> dict[str, int]:
    counts = {key: int(value) for key, value in result.manifest.counts.model_dump().items()}
    return {"items": result.items, **counts}
