"""A switch of a real unit that changed nothing the unit runs, and one whose worker was killed
(SIGKILL) between writing the pointer and asking systemd for the restart: the household's
systemd as PID 1 in a container and the real Claude Code in the example unit (the drill's
stage), the worker in this process.

Either way the record says what happened (nothing switched: the old session runs), the pointer
names the old session again, so that the unit's next restart resumes it, and the candidate left
`project_dir`, where Claude Code's `/resume` would list it.
"""

from __future__ import annotations

import signal
from pathlib import Path

from kael_thread_rebuild.operations import worker
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import MANIFEST_SUFFIX
from kael_thread_rebuild.switching.systemd import SystemdBase
from tests.builder import SESSION
from tests.operations.harness import write_source
from tests.operations.test_recovery import Env, run_killed_at

from . import test_drill as drill
from .test_drill import Stage, _scheduled

pytestmark = drill.pytestmark
# The drill's household, stand-in API and stage (a unit running the real Claude Code).
household, api, stage = drill.household, drill.api, drill.stage
S = OperationStatus


class SystemdEnv(Env):
    def fresh_base(self) -> SystemdBase:  # type: ignore[override]
        return SystemdBase(self.config)


def _candidate_moved_out(stage: Stage, op: Operation) -> None:
    new = op.new_session_id
    assert sorted(p.name for p in stage.claude.project_dir.glob("*.jsonl")) == [
        f"{SESSION}.jsonl"]
    assert not (stage.claude.project_dir / f"{new}{MANIFEST_SUFFIX}").exists()
    kept = stage.config.state_dir / "candidates" / op.operation_id
    assert op.candidate_path == str(kept / f"{new}.jsonl") and Path(op.candidate_path).is_file()


def test_a_restart_systemd_refuses_is_recorded_as_nothing_switched(stage: Stage) -> None:
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)
    before = base.identity()

    def refuse_restarts(step: str) -> None:
        # After prepare's checks: from here on, systemd refuses to restart the unit before
        # queuing anything (as it refuses a caller polkit does not authorise).
        if step == "switch":
            stage.household.write(f"/etc/systemd/system/{stage.unit}.d/refuse.conf",
                                  "[Unit]\nRefuseManualStart=yes\n")
            stage.household.systemctl("daemon-reload")

    op = worker.run_operation(stage.config, store, base, _scheduled(stage.config, base),
                              refuse_restarts)
    print(f"systemd refused switch: {op.status.value} ({op.history[-1].note}): {op.error}")

    new = op.new_session_id
    assert op.status is S.failed and op.rollback_ok is None, op.error
    assert op.history[-1].note == "nothing switched"
    assert op.error.startswith(f"switching to session {new} failed: ")
    assert op.error.endswith(f"; nothing was switched: the old session {SESSION} still runs")
    assert "failed too" not in op.error
    assert stage.pointer.read_text() == f"{SESSION}\n"
    assert base.identity().token == before.token  # never restarted
    _candidate_moved_out(stage, op)


def test_recovery_after_a_kill_between_the_pointer_and_the_restart(stage: Stage) -> None:
    source = write_source(stage.config)
    stage.start_on(SESSION)
    env = SystemdEnv(stage.config, stage.base(),  # type: ignore[arg-type]
                     OperationStore(stage.config.state_dir), source)
    before = env.fresh_base().identity()
    op = env.store.load(_scheduled(stage.config, env.fresh_base()))

    code, steps = run_killed_at(env, op, "restart", lambda step: None)
    assert code == -signal.SIGKILL and steps[-2:] == ["switch", "restart"], (code, steps)
    left = env.store.load(op.operation_id)
    new = left.new_session_id
    print(f"systemd kill at 'restart': the record is {left.status.value}, switch_target "
          f"{left.switch_target}; the pointer names {stage.pointer.read_text().strip()}")
    assert left.status is S.activating and left.switch_target == new
    assert stage.pointer.read_text() == f"{new}\n"  # written; the unit was not restarted

    (settled,) = worker.recover(stage.config, env.store, env.fresh_base())
    print(f"systemd recovery: {settled.status.value}: {settled.error}; the pointer names "
          f"{stage.pointer.read_text().strip()}")

    assert settled.status is S.failed and settled.rollback_ok is None
    assert settled.error == (f"interrupted before switching; nothing was switched: the old "
                             f"session {SESSION} still runs")
    assert stage.pointer.read_text() == f"{SESSION}\n"  # the unit's next start resumes it
    assert env.fresh_base().identity().token == before.token
    _candidate_moved_out(stage, settled)
    # The unit's next restart resumes the old session.
    stage.household.systemctl("restart", stage.unit)
    stage.wait_running(SESSION)
