"""Fault injection: SIGKILL the worker before each of its steps, then recover.

After recovery the operation is settled, the source is byte-identical, no temporary file is
left, and the record tells which session the target runs.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service, worker
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import MANIFEST_SUFFIX
from tests.builder import SESSION
from tests.conftest import ConfigFactory

from .harness import HarnessBase, leftovers, scheduled, stop_input, turn_ended, write_source

S = OperationStatus


@dataclass
class Env:
    config: Config
    base: HarnessBase
    store: OperationStore
    source: Path

    def fresh_base(self) -> HarnessBase:
        return HarnessBase(self.config, self.base.control)


def make_env(make_config: ConfigFactory, root: Path) -> Env:
    project = root / "project"
    project.mkdir(parents=True)
    pointer = root / "runner" / "session"
    pointer.parent.mkdir()
    pointer.write_text(SESSION + "\n")
    config = make_config(
        project_dir=str(project), state_dir=str(root / "state"), activation="pointer",
        resume_pointer_path=str(pointer), stability_interval_seconds=0.01,
        stability_timeout_seconds=3.0, health_window_seconds=0.05, health_timeout_seconds=0.3,
        poll_interval_seconds=0.01)
    return Env(config, HarnessBase(config, root / "control"), OperationStore(config.state_dir),
               write_source(config))


# Each scenario: set the stage, return the operation the worker will run.
Stage = Callable[[Env], Operation]


def happy(env: Env) -> Operation:
    return scheduled(env.config, env.base)


def new_dies(env: Env) -> Operation:
    op = scheduled(env.config, env.base)
    env.base.set("only-alive", SESSION)
    return op


def reload(env: Env) -> Operation:
    op = service.request_reload(env.config, "RELOAD").operation
    moved = service.record_stop(env.config, stop_input(env.config), env.base)
    assert moved is not None and moved.operation_id == op.operation_id
    return moved


def rollback(env: Env) -> Operation:
    op = worker.run_operation(env.config, env.store, env.base,
                              scheduled(env.config, env.base).operation_id)
    assert op.status is S.activated
    service.rollback_request(env.config, op.operation_id, "ROLLBACK")
    turn_ended(env.config, op.new_session_id or "")
    moved = service.record_stop(env.config,
                                stop_input(env.config, session=op.new_session_id or ""), env.base)
    assert moved is not None and moved.status is S.rollback_scheduled
    return moved


def rollback_old_dies(env: Env) -> Operation:
    op = rollback(env)
    env.base.set("dead", SESSION)
    return op


def nothing(env: Env, step: str) -> None:
    pass


def newer_transcript_at_last_check(env: Env, step: str) -> None:
    if step == "check_transcripts":
        (env.config.project_dir / "5e55a1d0-0000-4000-8000-00000000000c.jsonl").write_text("{}\n")


@dataclass(frozen=True)
class Scenario:
    stage: Stage
    expected: OperationStatus
    during: Callable[[Env, str], None] = nothing


SCENARIOS = {
    "activated": Scenario(happy, S.activated),
    "new_session_dies": Scenario(new_dies, S.rolled_back),
    "session_conflict": Scenario(happy, S.failed, newer_transcript_at_last_check),
    "rollback": Scenario(rollback, S.rolled_back),
    "rollback_old_dies": Scenario(rollback_old_dies, S.failed),
    "reload": Scenario(reload, S.activated),
}


def run_killed_at(env: Env, op: Operation, kill_at: int | str | None,
                  during: Callable[[str], None]) -> tuple[int | None, list[str]]:
    """Run the worker in a forked child that SIGKILLs itself before step number KILL_AT (or
    the first step of that name)."""
    ctx = multiprocessing.get_context("fork")
    steps_file = env.config.state_dir.parent / "steps.log"

    def child() -> None:
        count = 0

        def on_step(name: str) -> None:
            nonlocal count
            during(name)
            with steps_file.open("a") as log:
                log.write(name + "\n")
            if kill_at in (count, name):
                os.kill(os.getpid(), signal.SIGKILL)
            count += 1

        worker.run_operation(env.config, OperationStore(env.config.state_dir), env.fresh_base(),
                             op.operation_id, on_step)

    process = ctx.Process(target=child)
    process.start()
    process.join(60)
    steps = steps_file.read_text().split() if steps_file.exists() else []
    steps_file.unlink(missing_ok=True)
    return process.exitcode, steps


def check_truth(env: Env, op: Operation, source_bytes: bytes) -> None:
    """The record and the target agree on which session runs."""
    assert op.settled, op.status
    assert op.switch_target is None
    assert env.source.read_bytes() == source_bytes
    assert leftovers(env.config.project_dir, env.config.state_dir) == []
    pointer, new = env.base.pointer(), op.new_session_id
    was_activated = any(step.to_status is S.activated for step in op.history)
    if op.status is S.activated:
        assert pointer == new
        assert (env.config.project_dir / f"{new}.jsonl").exists()
        assert not (env.config.project_dir / f"{new}{MANIFEST_SUFFIX}").exists()
    elif op.status is S.rolled_back:
        assert pointer == SESSION and op.rollback_ok is True
    elif was_activated:
        assert pointer == new, op.error  # a rollback that did not happen or was undone
    else:
        assert op.status is S.failed and op.rollback_ok is None
        assert pointer == SESSION, op.error  # nothing switched
        if new and new != SESSION:  # a reload's "new" session is the one that ran
            assert not (env.config.project_dir / f"{new}.jsonl").exists()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sigkill_at_every_step_then_recover(make_config: ConfigFactory, tmp_path: Path,
                                            name: str) -> None:
    scenario = SCENARIOS[name]
    reference = make_env(make_config, tmp_path / "reference")
    code, steps = run_killed_at(reference, scenario.stage(reference), None,
                                functools.partial(scenario.during, reference))
    assert code == 0 and steps, (code, steps)
    finished = reference.store.list_operations()[-1]
    assert finished.status is scenario.expected, finished.error

    outcomes = []
    for kill_at, step_name in enumerate(steps):
        env = make_env(make_config, tmp_path / f"kill-{kill_at}")
        op = scenario.stage(env)
        source_bytes = env.source.read_bytes()
        code, seen = run_killed_at(env, op, kill_at, functools.partial(scenario.during, env))
        assert code == -signal.SIGKILL, (kill_at, step_name, code)
        assert seen[-1] == step_name, (kill_at, seen)
        settled = worker.recover(env.config, env.store, env.fresh_base())
        op = env.store.load(op.operation_id)
        assert [o.operation_id for o in settled] == [op.operation_id]
        check_truth(env, op, source_bytes)
        outcomes.append(f"{step_name}->{op.status.value}")
        # Recovery is idempotent and leaves nothing in flight.
        assert worker.recover(env.config, env.store, env.fresh_base()) == []
        assert env.store.active() is None
    print(f"\n{name}: {', '.join(outcomes)}")


def test_recover_removes_half_written_files(make_config: ConfigFactory, tmp_path: Path) -> None:
    env = make_env(make_config, tmp_path)
    op = scheduled(env.config, env.base)
    junk: list[Path] = []

    def half_written(step: str) -> None:
        if step == "write_candidate":  # as if the writer died inside its atomic writes
            current = OperationStore(env.config.state_dir).load(op.operation_id)
            for name in (f"{current.new_session_id}.jsonl",
                         f"{current.new_session_id}{MANIFEST_SUFFIX}"):
                junk.append(env.config.project_dir / f".{name}.a1b2c3.tmp")
            junk.append(Path(current.backup_path or "").parent / ".x.jsonl.d4e5f6.tmp")
            junk.append(env.store.operations_dir / f".{op.operation_id}.json.g7h8.tmp")
            for path in junk:
                path.write_text("half")

    code, steps = run_killed_at(env, op, "write_candidate", half_written)
    assert code == -signal.SIGKILL and steps[-1] == "write_candidate"
    assert leftovers(env.config.project_dir, env.config.state_dir)
    worker.recover(env.config, env.store, env.fresh_base())
    check_truth(env, env.store.load(op.operation_id), env.source.read_bytes())
    assert not any(path.exists() for path in junk)


def test_recover_fails_waiting_operations(make_config: ConfigFactory, tmp_path: Path) -> None:
    env = make_env(make_config, tmp_path)
    op = service.request(env.config, "r", "REBUILD")
    (settled,) = worker.recover(env.config, env.store, env.base)
    assert settled.operation_id == op.operation_id and settled.status is S.failed
    assert settled.error.startswith("interrupted before switching")
    activated = worker.run_operation(env.config, env.store, env.base,
                                     scheduled(env.config, env.base).operation_id)
    service.rollback_request(env.config, activated.operation_id, "ROLLBACK")
    (settled,) = worker.recover(env.config, env.store, env.base)
    assert settled.status is S.failed and settled.error.startswith("rollback not performed")
    assert env.base.pointer() == activated.new_session_id
    check_truth(env, settled, env.source.read_bytes())
