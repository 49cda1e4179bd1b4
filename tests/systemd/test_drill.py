"""The systemd drill: the real Claude Code as the main process of a unit in a container running
systemd as PID 1, switched by the systemd base over the container's system bus, from this process
(through the bind-mounted bus socket) and from the appliance image in a sibling container that
has only the bus socket dir, the pointer dir and the session registry mounted.

Interactive Claude Code gets its terminal from the example start script (script(1)); the example
unit is installed verbatim with a drop-in for the drill's paths. Runs only with a Docker engine.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.runner import run_doctor
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.operations.switchover import health_problem
from kael_thread_rebuild.operations.worker import run_operation
from kael_thread_rebuild.switching.dbus import JobFailed, SystemdManager, UnitNotFound
from kael_thread_rebuild.switching.pointer import write_pointer
from kael_thread_rebuild.switching.systemd import SystemdBase
from tests.builder import SESSION
from tests.guard import MARK, assert_safe_target
from tests.operations.harness import SECRET, stop_input, turn_ended, write_source
from tests.support.claude_env import (
    ClaudeEnv,
    claude_available,
    find_claude_binary,
    make_claude_env,
)
from tests.support.fidelity import conversation_texts, non_text_block_types
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import safe_config, wait_until, write_minimal_session

from .household import (
    CLIENT,
    DRILL_CLIENT,
    DRILL_SITE,
    DRILL_SRC,
    HARDENING,
    LABEL,
    REPO,
    USER_UID,
    Household,
    appliance_image,
    docker,
    docker_reachable,
)

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not docker_reachable(), reason="no Docker engine is reachable"),
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
]

#: The household's own flags: spaces, a quote, `%` and `$` must reach Claude Code unchanged.
FLAGS = ["--append-system-prompt", "You are the drill's household: 100% of $HOME."]
SOURCE = REPO / "src" / "kael_thread_rebuild"
REGISTER_TIMEOUT = 60.0
#: Where the household has the real Claude Code (bind-mounted).
HOUSEHOLD_CLAUDE = "/usr/local/bin/claude"


def report(what: str, seconds: float) -> None:
    print(f"systemd drill: {what}: {seconds:.2f} s")


@pytest.fixture(scope="module")
def api() -> Iterator[StandinAPI]:
    with StandinAPI() as server:
        yield server


@pytest.fixture(scope="module")
def household(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Household]:
    root = tmp_path_factory.mktemp("systemd-drill")
    binary = Path(os.path.realpath(find_claude_binary()))
    with Household(root, binary) as house:
        report("household up (image build or cache, container, systemd running)",
               house.boot_seconds)
        yield house


@dataclass
class Stage:
    household: Household
    claude: ClaudeEnv
    unit: str
    pointer: Path
    config: Config

    def base(self) -> SystemdBase:
        return SystemdBase(self.config)

    def start_on(self, session_id: str) -> float:
        """Point the unit at SESSION_ID, start it; seconds until Claude Code reports it."""
        write_pointer(self.pointer, session_id)
        started = time.monotonic()
        self.household.systemctl("start", self.unit)
        self.wait_running(session_id)
        return time.monotonic() - started

    def wait_running(self, session_id: str) -> None:
        base = self.base()
        try:
            wait_until(lambda: base.running_session() == session_id, timeout=REGISTER_TIMEOUT,
                       what=f"the unit to run session {session_id}")
        except TimeoutError:
            raise AssertionError(self.household.journal(self.unit)) from None

    def wait_idle(self, session_id: str) -> None:
        """Until the unit's Claude Code says in its registry entry that SESSION_ID waits for
        input."""
        pid = self.base().identity().token["claude_pid"]

        def idle() -> bool:
            return any(str(entry.pid) == pid and entry.session_id == session_id
                       and entry.status == "idle"
                       for entry in registry.read_entries(self.claude.config_dir))
        wait_until(idle, timeout=REGISTER_TIMEOUT, what=f"session {session_id} to be idle")

    def claude_argv(self) -> list[str]:
        """The argv of the unit's registered Claude Code (read in the household)."""
        registered = {entry.pid for entry in registry.read_entries(self.claude.config_dir)}
        with SystemdManager(self.household.bus_address, "the household bus") as manager:
            pids = [p.pid for p in manager.unit_processes(self.unit) if p.pid in registered]
        assert len(pids) == 1, pids
        raw = self.household.exec("cat", f"/proc/{pids[0]}/cmdline").stdout
        return raw.split("\0")[:-1]


@pytest.fixture
def stage(household: Household, api: StandinAPI,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    root = household.root / f"stage-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    claude = make_claude_env(root / "claude", api.url)
    claude.project_dir.mkdir(parents=True)
    unit = f"kael-claude-{MARK}-{root.name}.service"
    pointer = root / "pointer-dir" / "pointer"
    pointer.parent.mkdir()
    environment = {**claude.env, "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "root"}
    household.install_claude_unit(unit, workdir=claude.cwd, pointer=pointer,
                                  environment=environment, flags=FLAGS)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", household.bus_address)
    config = safe_config(root, activation="systemd", systemd_unit=unit,
                         resume_pointer_path=pointer, project_dir=claude.project_dir,
                         claude_workdir=claude.cwd, claude_config_dir=claude.config_dir,
                         stability_interval_seconds=0.1, health_window_seconds=1.0,
                         health_timeout_seconds=REGISTER_TIMEOUT, poll_interval_seconds=0.1)
    try:
        yield Stage(household, claude, unit, pointer, config)
    finally:
        household.systemctl("stop", unit, check=False)
        household.systemctl("stop", unit.removesuffix(".service") + ".socket", check=False)


def test_switch_and_back_over_the_mounted_bus(stage: Stage) -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    write_minimal_session(stage.claude.project_dir, old)
    write_minimal_session(stage.claude.project_dir, new)
    report("unit start to the registry naming the session", stage.start_on(old))
    base = stage.base()
    before = base.identity()
    assert before.running_session_id == old
    assert before.token["active_state"] == "active"
    assert stage.claude_argv() == ["claude", "--resume", old, *FLAGS]

    started = time.monotonic()
    assert base.switch_to(new) == [new]
    report("switch_to (pointer write + RestartUnit job done)", time.monotonic() - started)
    assert stage.pointer.read_text() == f"{new}\n"
    stage.wait_running(new)
    report("switch downtime (switch_to call to the registry naming the new session)",
           time.monotonic() - started)
    after = base.identity()
    assert after.running_session_id == new
    assert after.token["main_pid"] != before.token["main_pid"]
    assert after.token["invocation_id"] != before.token["invocation_id"]
    assert base.alive()
    assert stage.claude_argv() == ["claude", "--resume", new, *FLAGS]  # every flag kept
    assert health_problem(base, new, stage.config, must_report=True) == ""

    started = time.monotonic()
    base.switch_to(old)
    stage.wait_running(old)
    report("switch back", time.monotonic() - started)
    assert base.identity().running_session_id == old
    # The replaced processes left cleanly: only the running one is registered.
    assert [e.session_id for e in registry.read_entries(stage.claude.config_dir)] == [old]


def _scheduled(config: Config, base: SystemdBase) -> str:
    op = service.request(config, "systemd drill", "REBUILD")
    changed = service.record_stop(config, stop_input(config), base)
    assert changed is not None and changed.status is OperationStatus.scheduled, changed
    return op.operation_id


def test_the_worker_rebuilds_the_unit_and_rolls_it_back(stage: Stage) -> None:
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)

    started = time.monotonic()
    op = run_operation(stage.config, store, base, _scheduled(stage.config, base))
    report("worker: scheduled to activated (prepare, verify, switch, health window)",
           time.monotonic() - started)
    assert op.status is OperationStatus.activated, op.error
    new = op.new_session_id
    assert new is not None and base.running_session() == new
    assert stage.pointer.read_text() == f"{new}\n"
    assert op.identity_before is not None and op.identity_after is not None
    assert op.identity_after.token["main_pid"] != op.identity_before.token["main_pid"]

    service.rollback_request(stage.config, op.operation_id, "ROLLBACK")
    turn_ended(stage.config, new)  # the rollback's Stop ends a turn of the new session
    scheduled = service.record_stop(stage.config, stop_input(stage.config, session=new), base)
    assert scheduled is not None and scheduled.status is OperationStatus.rollback_scheduled
    started = time.monotonic()
    op = run_operation(stage.config, store, base, op.operation_id)
    report("worker: rollback to rolled_back", time.monotonic() - started)
    assert op.status is OperationStatus.rolled_back, op.error
    assert base.running_session() == SESSION
    assert stage.pointer.read_text() == f"{SESSION}\n"


def test_the_worker_refuses_when_the_unit_restarted_behind_its_back(stage: Stage) -> None:
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)

    def restart_behind(step: str) -> None:
        if step == "check_identity":
            stage.household.systemctl("restart", stage.unit)

    op = run_operation(stage.config, store, base, _scheduled(stage.config, base),
                       on_step=restart_behind)
    assert op.status is OperationStatus.failed
    assert op.session_conflict
    assert op.error is not None and "the target changed since prepare" in op.error
    assert "main_pid=" in op.error
    assert stage.pointer.read_text() == f"{SESSION}\n"  # nothing switched
    assert [p.stem for p in stage.claude.project_dir.glob("*.jsonl")] == [SESSION]
    stage.wait_running(SESSION)


def test_a_symlinked_pointer_is_refused_before_anything_is_touched(stage: Stage) -> None:
    """The unit reads the pointer through a symlink; the switch would replace the link, not the
    file: doctor says so, and the worker refuses at prepare (no backup, no candidate, the unit
    and the pointer as they were) instead of failing at activation."""
    write_source(stage.config)
    stage.start_on(SESSION)
    real = stage.pointer.with_name("real-pointer")
    stage.pointer.rename(real)
    stage.pointer.symlink_to(real)
    base, store = stage.base(), OperationStore(stage.config.state_dir)
    before = base.identity()
    refusal = f"pointer file {stage.pointer} is a symlink; configure the real file's path"
    check = next(c for c in run_doctor(stage.config).checks if c.name == "activation")
    assert not check.ok and check.detail == refusal, check

    op = run_operation(stage.config, store, base, _scheduled(stage.config, base))
    assert op.status is OperationStatus.failed
    assert op.error == f"the switch could not act on the target: {refusal}"
    assert op.backup_path is None and op.new_session_id is None and op.switch_target is None
    assert [p.stem for p in stage.claude.project_dir.glob("*.jsonl")] == [SESSION]
    assert stage.pointer.is_symlink() and real.read_text() == f"{SESSION}\n"
    assert base.identity().token == before.token


def _in_the_health_window(stage: Stage, *systemctl: str, step_name: str = "health") -> tuple[
        Callable[[str], None], threading.Thread]:
    """A step hook that runs `systemctl SYSTEMCTL… <unit>` as the household's admin would, 0.3 s
    into the health window (the window is 1 s) of the switch to the new session (STEP_NAME
    `health_old`: back to the old one)."""
    def act() -> None:
        time.sleep(0.3)
        stage.household.systemctl(*systemctl, stage.unit)

    acting = threading.Thread(target=act)

    def on_step(step: str) -> None:
        if step == step_name and not acting.is_alive() and acting.ident is None:
            acting.start()

    return on_step, acting


def _unit_state(stage: Stage) -> str:
    return stage.household.systemctl("is-active", stage.unit, check=False).stdout.strip()


def _rebuild_meeting(stage: Stage, *systemctl: str) -> Operation:
    """A rebuild of the unit running SESSION, with `systemctl SYSTEMCTL… <unit>` in its health
    window."""
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)
    on_step, acting = _in_the_health_window(stage, *systemctl)
    op = run_operation(stage.config, store, base, _scheduled(stage.config, base), on_step)
    acting.join()
    return op


def test_an_admins_stop_during_the_switch_is_respected(stage: Stage) -> None:
    op = _rebuild_meeting(stage, "stop")
    print(f"systemd drill: after the admin's stop: {op.status.value}: {op.error}")
    assert op.status is OperationStatus.failed, op.error
    assert op.history[-1].note == "stopped from outside"
    assert "the target was stopped from outside during the switch" in op.error
    assert op.error.endswith(f"it is left stopped, not started again; its next start resumes "
                             f"the old session {SESSION}")
    assert _unit_state(stage) == "inactive"  # not started again
    assert stage.pointer.read_text() == f"{SESSION}\n"
    assert [p.stem for p in stage.claude.project_dir.glob("*.jsonl")] == [SESSION]
    assert op.candidate_path is not None and Path(op.candidate_path).is_file()
    stage.household.systemctl("start", stage.unit)  # the admin's next start: the old session
    stage.wait_running(SESSION)


def test_an_admins_stop_during_a_rollback_is_respected(stage: Stage) -> None:
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)
    op = run_operation(stage.config, store, base, _scheduled(stage.config, base))
    new = op.new_session_id
    assert op.status is OperationStatus.activated and new is not None, op.error
    service.rollback_request(stage.config, op.operation_id, "ROLLBACK")
    turn_ended(stage.config, new)
    assert service.record_stop(stage.config, stop_input(stage.config, session=new), base)
    on_step, stopping = _in_the_health_window(stage, "stop", step_name="health_old")

    op = run_operation(stage.config, store, base, op.operation_id, on_step)
    stopping.join()
    assert op.status is OperationStatus.failed, op.error
    assert op.error.startswith("rollback not performed: the target is not alive"), op.error
    assert op.error.endswith(f"it is left stopped, not started again; its next start resumes "
                             f"the rebuilt session {new}")
    assert _unit_state(stage) == "inactive"
    assert stage.pointer.read_text() == f"{new}\n"


def test_an_admins_restart_in_the_health_window_is_not_a_crash(stage: Stage) -> None:
    # A start that takes half a second (a household's ExecStartPre): the restart is seen.
    stage.household.write(f"/etc/systemd/system/{stage.unit}.d/slow-start.conf",
                          "[Service]\nExecStartPre=/bin/sleep 0.5\n")
    stage.household.systemctl("daemon-reload")
    op = _rebuild_meeting(stage, "restart")
    assert op.status is OperationStatus.activated, op.error
    new = op.new_session_id
    assert new is not None and stage.base().running_session() == new
    # Started twice on the new session: by the switch, then by the admin's restart.
    starts = stage.household.journal(stage.unit).count(f"claude-start: resuming session {new}")
    assert starts == 2, stage.household.journal(stage.unit)


def test_a_crash_in_the_health_window_is_still_a_crash(stage: Stage) -> None:
    """systemd restarts a crashed unit by itself (Restart=on-failure) onto the same pointer:
    that is no restart from outside; the new session is not healthy."""
    op = _rebuild_meeting(stage, "kill", "--signal", "KILL")
    assert op.status is OperationStatus.rolled_back, op.error
    assert op.error.startswith(f"the target is not alive after switching to session "
                               f"{op.new_session_id}")
    stage.wait_running(SESSION)


def submit_on(fifo: Path, text: str, submitted: Callable[[], bool]) -> int:
    """Type TEXT on the unit's terminal and press Enter until SUBMITTED() says Claude Code took
    it (an Enter that arrives while it still starts up leaves the text in its input box, as it
    would for a person, who presses Enter again); returns the number of presses."""
    deadline = time.monotonic() + REGISTER_TIMEOUT
    with fifo.open("wb", buffering=0) as keys:
        keys.write(text.encode())
        for presses in itertools.count(1):
            time.sleep(0.3)
            keys.write(b"\r")
            try:
                wait_until(submitted, timeout=5.0, what="the prompt to be submitted")
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise
                continue
            return presses
    raise AssertionError("unreachable")


def test_a_start_that_fails_restarts_the_unit_on_the_old_pointer(stage: Stage,
                                                                  api: StandinAPI) -> None:
    # The start script runs CLAUDE_BIN: a link (in the test's dir, seen at the same path in the
    # household) to the household's Claude Code, missing when the new session starts.
    program = stage.pointer.parent.parent / "bin" / "claude"
    program.parent.mkdir()
    program.symlink_to(HOUSEHOLD_CLAUDE)
    environment = {**stage.claude.env, "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "root",
                   "CLAUDE_BIN": str(program)}
    keys = stage.pointer.parent.parent / "terminal-input"
    stage.household.install_claude_unit(stage.unit, workdir=stage.claude.cwd,
                                        pointer=stage.pointer, environment=environment,
                                        flags=FLAGS, input_fifo=keys)
    write_source(stage.config)
    stage.start_on(SESSION)
    base, store = stage.base(), OperationStore(stage.config.state_dir)
    before = base.identity()
    assert before.token["claude_pid"] and before.running_session_id == SESSION
    assert base.start_problem(SESSION) == ""  # the unit runs from its ExecStart program

    def program_missing_at_the_start(step: str) -> None:
        if step == "switch":
            program.unlink()
        if step == "switch_back":
            program.symlink_to(HOUSEHOLD_CLAUDE)

    op = run_operation(stage.config, store, base, _scheduled(stage.config, base),
                       on_step=program_missing_at_the_start)

    assert op.status is OperationStatus.rolled_back and op.rollback_ok is True, op.error
    assert op.error is not None and op.error.endswith("; the old session was resumed")
    assert op.rollback_argv == [SESSION]
    assert stage.pointer.read_text() == f"{SESSION}\n"
    after = base.identity()
    assert after.running_session_id == SESSION
    assert after.token["claude_pid"] != before.token["claude_pid"]
    assert "claude-start: resuming session " + SESSION in stage.household.journal(stage.unit)

    # The old session answers: a message typed on the unit's terminal reaches the resumed
    # Claude Code, which sends the old conversation (its tool calls too: not the rebuilt one)
    # and records the turn in the old transcript.
    source = stage.claude.session_path(SESSION)
    before_turn = source.read_bytes()
    prompt = f"drill {stage.unit}: are you back?"
    stage.wait_idle(SESSION)
    presses = submit_on(keys, prompt, lambda: prompt in source.read_text())
    print(f"systemd drill: Enter pressed {presses} time(s) until the old session took the prompt")

    def answered() -> list[dict[str, Any]]:
        return [body for body in api.message_bodies()
                if conversation_texts(body)[-1:] == [("user", prompt)]]

    try:
        body, *_ = wait_until(answered, timeout=REGISTER_TIMEOUT, what="the old session to ask "
                              "the API")
    except TimeoutError:
        raise AssertionError(stage.household.journal(stage.unit)) from None
    assert conversation_texts(body)[:3] == [("user", f"hello, {SECRET}"),
                                            ("assistant", "let me look"),
                                            ("assistant", "I looked.")]
    assert {"tool_use", "tool_result"} <= non_text_block_types(body)
    wait_until(lambda: b"stand-in reply" in source.read_bytes()[len(before_turn):],
               timeout=REGISTER_TIMEOUT, what="the answer in the old session's transcript")
    assert source.read_bytes().startswith(before_turn)
    assert prompt in source.read_text()
    assert base.running_session() == SESSION


def _client_args(config: Config, sessions: list[str]) -> str:
    assert_safe_target(config)  # the base is built out of the guard's reach, in a container
    return json.dumps({"config": config.model_dump(mode="json"), "sessions": sessions,
                       "timeout": REGISTER_TIMEOUT})


def _client_result(proc: subprocess.CompletedProcess[str]) -> tuple[int, dict[str, Any]]:
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"client exited {proc.returncode}: {proc.stderr[-2000:]}") from None


def _appliance(stage: Stage, user: str, config: Config, sessions: list[str],
               read_only: list[Path]) -> tuple[int, dict[str, Any]]:
    """Run the client in the appliance image, hardened, with only the bus dir, the pointer dir
    and READ_ONLY mounted (at the same paths)."""
    image = appliance_image()
    package = docker("run", "--rm", "--entrypoint", "/opt/kael/bin/python", image, "-c",
                     "import kael_thread_rebuild, os; "
                     "print(os.path.dirname(kael_thread_rebuild.__file__))").stdout.strip()
    assert config.resume_pointer_path is not None
    pointer_dir = config.resume_pointer_path.parent
    volumes = [f"{stage.household.bus_dir}:/run/dbus", f"{pointer_dir}:{pointer_dir}",
               *(f"{path}:{path}:ro" for path in read_only),
               f"{SOURCE}:{package}:ro",  # the code under test, over the image's own copy
               f"{CLIENT}:/drill/client.py:ro"]
    return _client_result(docker(
        "run", "--rm", "--name", f"kael-{MARK}-appliance-{uuid.uuid4().hex[:8]}",
        "--label", LABEL, *HARDENING, "--user", user, "--entrypoint", "/opt/kael/bin/python",
        *(arg for volume in volumes for arg in ("-v", volume)),
        image, "/drill/client.py", _client_args(config, sessions), check=False, timeout=300))


def test_the_appliance_switches_from_a_sibling_container(stage: Stage) -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    write_minimal_session(stage.claude.project_dir, old)
    write_minimal_session(stage.claude.project_dir, new)
    stage.start_on(old)
    before = stage.base().identity()

    started = time.monotonic()
    code, out = _appliance(stage, "0:0", stage.config, [new, old],
                           [registry.registry_dir(stage.claude.config_dir)])
    report("appliance container: run, switch and switch back", time.monotonic() - started)
    assert code == 0, out
    assert out["before"]["token"] == before.token
    assert out["before"]["running_session_id"] == old
    to_new, to_old = out["switches"]
    assert to_new["identity"]["running_session_id"] == new
    assert to_new["identity"]["token"]["main_pid"] != before.token["main_pid"]
    assert to_old["identity"]["running_session_id"] == old
    for name, leg in (("to the new session", to_new), ("back to the old one", to_old)):
        report(f"appliance switch_to {name}", leg["switch_seconds"])
        report(f"appliance switch {name}, until the registry names it", leg["reported_seconds"])
    assert stage.base().running_session() == old


def test_an_appliance_without_permission_gets_access_denied(stage: Stage) -> None:
    old = str(uuid.uuid4())
    write_minimal_session(stage.claude.project_dir, old)
    stage.start_on(old)
    before = stage.base().identity()
    # Its own pointer dir: the unit's pointer must not change when the restart is refused.
    own = stage.pointer.parent.parent / "nobody-pointer" / "pointer"
    own.parent.mkdir()
    own.parent.chmod(0o777)
    config = stage.config.model_copy(update={"resume_pointer_path": own})

    code, out = _appliance(stage, "65534:65534", config, [SESSION], [])
    assert code == 3
    print(f"systemd drill: the unprivileged appliance was told: {out['error']}")
    assert out["error"].startswith("access denied on the system bus"), out
    assert stage.unit in out["error"]
    assert stage.base().identity().token == before.token


def test_unknown_unit_and_failed_job_are_clear(stage: Stage) -> None:
    assert stage.base().start_problem(SESSION) == (
        f"unit {stage.unit} is not running, so its ExecStart program "
        "/usr/local/bin/claude-start is not known to start")
    missing = stage.config.model_copy(update={"systemd_unit": f"absent-{MARK}.service"})
    base = SystemdBase(missing)
    with pytest.raises(UnitNotFound, match=r"cannot use unit absent-DO-NOT-CREATE\.service: "
                                           r"LoadState is not-found"):
        base.identity()
    with pytest.raises(UnitNotFound):
        base.switch_to(SESSION)
    assert not stage.pointer.exists()  # refused before the pointer was touched
    assert not base.alive()

    failing = f"failing-{MARK}-{uuid.uuid4().hex[:6]}.service"
    stage.household.install_unit(failing, "[Service]\nType=simple\nExecStartPre=/bin/false\n"
                                          "ExecStart=/bin/sleep infinity\n")
    base = SystemdBase(stage.config.model_copy(update={"systemd_unit": failing}))
    with pytest.raises(JobFailed, match=r"the job ended with result 'failed'"):
        base.switch_to(SESSION)


def test_a_user_unit_switched_over_the_user_bus(household: Household, api: StandinAPI) -> None:
    """Claude Code as a user unit of an unprivileged user (lingering, no login), switched by
    that user over its own bus: no polkit, no root. The user bus exists only inside the
    household, so the client runs there, as that user, finding the bus by XDG_RUNTIME_DIR."""
    household.start_user_manager()
    household.root.chmod(0o755)  # the user must reach its dirs inside
    root = household.root / f"user-{uuid.uuid4().hex[:8]}"
    claude = make_claude_env(root / "claude", api.url)
    claude.project_dir.mkdir(parents=True)
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    write_minimal_session(claude.project_dir, old)
    write_minimal_session(claude.project_dir, new)
    pointer = root / "pointer-dir" / "pointer"
    pointer.parent.mkdir()
    write_pointer(pointer, old)
    for path in [root, *root.rglob("*")]:
        os.chown(path, USER_UID, USER_UID, follow_symlinks=False)
    unit = f"kael-claude-{MARK}-{root.name}.service"
    household.install_claude_unit(
        unit, workdir=claude.cwd, pointer=pointer, flags=FLAGS, user=True,
        environment={**claude.env, "PATH": "/usr/local/bin:/usr/bin:/bin"})
    config = safe_config(root, activation="systemd", systemd_unit=unit, systemd_bus="user",
                         resume_pointer_path=pointer, project_dir=claude.project_dir,
                         claude_config_dir=claude.config_dir)
    try:
        started = time.monotonic()
        household.systemctl("start", unit, user=True)
        # The user manages its own unit: the activation check lets it (no polkit asked).
        asked = household.exec_as_user(
            "env", f"PYTHONPATH={DRILL_SRC}:{DRILL_SITE}", "python3", "-c",
            "import sys; from kael_thread_rebuild.config import Config; "
            "from kael_thread_rebuild.switching.systemd import SystemdBase; "
            "print(repr(SystemdBase(Config.model_validate_json(sys.argv[1]))"
            ".activation_problem()))", config.model_dump_json(), check=False)
        assert asked.stdout.strip() == "''", asked
        code, out = _client_result(household.exec_as_user(
            "env", f"PYTHONPATH={DRILL_SRC}:{DRILL_SITE}",
            "python3", DRILL_CLIENT, _client_args(config, [old, new, old]),
            check=False, timeout=300))
        report("user unit: start, switch and switch back over the user bus",
               time.monotonic() - started)
        assert code == 0, (out, household.journal(unit, user=True))
        assert out["before"]["token"]["unit"] == unit
        first, to_new, to_old = out["switches"]
        assert first["identity"]["running_session_id"] == old
        assert to_new["identity"]["running_session_id"] == new
        assert to_new["identity"]["token"]["main_pid"] != first["identity"]["token"]["main_pid"]
        assert to_old["identity"]["running_session_id"] == old
        report("user unit: switch until the registry names the new session",
               to_new["reported_seconds"])
        assert pointer.read_text() == f"{old}\n"
    finally:
        household.systemctl("stop", unit, user=True, check=False)
