"""The systemd base: Claude Code runs in a service unit whose start script reads the session id
from a pointer file (`examples/systemd/`); switching rewrites the pointer atomically and restarts
the unit over D-Bus, waiting for the restart job's result.

Identity is the unit's `MainPID` with its `ActiveState` and `InvocationID` (new on every start, so
a restart behind the engine's back shows even if a pid is reused). The running session comes
from Claude Code's registry (`<claude config dir>/sessions/<pid>.json`) for a process in the
unit's control group, as systemd lists it: that works from another pid namespace (the appliance
container), where `/proc` shows none of the unit's processes. Without `claude_config_dir` the
pointer's content is the best available answer (what the running process was started with, as
long as nobody else writes the pointer).

The engine must run outside the unit's control group (the appliance's daemon container): a
restart kills every process in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from ..claude_code import registry
from ..config import Config
from ..errors import Refused
from .base import Identity, StepHook
from .dbus import (
    AccessDenied,
    BusUnreachable,
    ExecCommand,
    RunState,
    SystemdManager,
    UnitNotFound,
    UnitState,
    bus_address,
)
from .pointer import (
    PointerError,
    point_back,
    read_pointer,
    replace_problem,
    session_in,
    write_pointer,
)

#: Longer than systemd's default stop timeout (90 s) plus a start.
RESTART_TIMEOUT_SECONDS = 120.0
#: How often a stop from outside is looked at while it runs.
STOP_POLL_SECONDS = 0.05

_OTHER_UNIT_TYPES = frozenset({"socket", "target", "device", "mount", "automount", "swap", "timer",
                               "path", "slice", "scope"})


def service_name(unit: str) -> str:
    """UNIT as systemd's D-Bus API needs it: `.service` appended when no unit type is given, as
    systemctl does; other unit types are refused (only a service has a main process)."""
    suffix = unit.rpartition(".")[2] if "." in unit else ""
    if suffix == "service":
        return unit
    if suffix in _OTHER_UNIT_TYPES:
        raise Refused(f"systemd_unit {unit!r} is a {suffix} unit; the systemd base restarts a "
                      "service unit")
    return f"{unit}.service"


def entry_in_unit(claude_config_dir: Path, main_pid: int,
                  pids: Iterable[int]) -> registry.RegistryEntry | None:
    """The registry entry of the unit's Claude Code: MainPID's own, else the earliest started of
    the unit's other processes (a pty wrapper such as script(1) runs Claude as its child; a later
    entry can be a `claude -p` that Claude itself started)."""
    in_unit = set(pids)
    entries = [entry for entry in registry.read_entries(claude_config_dir)
               if entry.pid in in_unit and _same_process(entry)]
    own = next((entry for entry in entries if entry.pid == main_pid), None)
    if own is not None:
        return own
    return min(entries, key=lambda e: (e.started_at is None, e.started_at or 0, e.pid),
               default=None)


def _same_process(entry: registry.RegistryEntry) -> bool:
    """Whether an entry whose pid is in the unit names the process that has that pid now: the
    start time can only be compared from the same pid namespace; otherwise systemd listing the
    pid in the unit is the proof."""
    if entry.proc_start is None or entry.pid_domain is None:
        return True
    if entry.pid_domain != registry.pid_domain():
        return True
    return registry.proc_start(entry.pid) == entry.proc_start


#: Jobs that bring a unit up again: while one runs for a unit that did not crash, it is being
#: restarted (or started) from outside, onto whatever its pointer names.
_STARTING_JOBS = frozenset({"restart", "start", "try-restart", "reload-or-start",
                            "reload-or-restart"})


def outside_stop(run: RunState, stop_job: bool = False) -> str:
    """Why RUN shows a unit stopped on purpose (an admin's `systemctl stop`: STOP_JOB when one
    was seen running; or a Claude Code that quit cleanly, which `Restart=on-failure` does not
    restart either), in one line; empty when it is not (running, crashed, coming up again)."""
    if stop_job and run.job_type in ("", "stop") and run.active_state != "active":
        return "systemctl stop: a stop job ran for it"
    if run.active_state == "inactive" and run.result == "success" and not run.job_type:
        return "inactive after a stop or a clean exit, which systemd does not restart either"
    return ""


def outside_restart(run: RunState) -> bool:
    """Whether RUN shows a unit being restarted (or started) from outside, not a crash: a job
    that starts it runs, its last run did not fail, and systemd restarted nothing by itself
    (`NRestarts` counts only the automatic restarts since the last restart from outside)."""
    return run.job_type in _STARTING_JOBS and run.result == "success" and run.restarts == 0


def start_problems(unit: str, commands: list[ExecCommand], running: bool) -> str:
    """What can be known from outside the unit: it has an ExecStart program, and the running
    main process was started by it (the program existed at the unit's last start). The files
    themselves live in the unit's mount namespace, which the engine (a container) does not see;
    a start that fails anyway is rolled back by restarting the unit on the old pointer."""
    if not commands:
        return f"unit {unit} has no ExecStart"
    program = commands[0].path
    if not running:
        return f"unit {unit} is not running, so its ExecStart program {program} is not known " \
               "to start"
    if commands[0].pid <= 0:
        return f"unit {unit} runs, but not from its ExecStart program {program}"
    return ""


class SystemdBase:
    name = "systemd"

    def __init__(self, config: Config, *,
                 restart_timeout: float = RESTART_TIMEOUT_SECONDS) -> None:
        if not config.systemd_unit:
            raise Refused("the systemd base needs systemd_unit in the config")
        if config.resume_pointer_path is None:
            raise Refused("the systemd base needs resume_pointer_path in the config "
                          "(the file the unit's start script reads)")
        self.unit = service_name(config.systemd_unit)
        self.pointer = config.resume_pointer_path
        self.claude_config_dir = config.claude_config_dir
        self.restart_timeout = restart_timeout
        self.address = bus_address(config.systemd_bus)
        self.bus_label = f"the {config.systemd_bus.value} bus ({self.address})"

    def _manager(self) -> SystemdManager:
        return SystemdManager(self.address, self.bus_label)

    def state(self) -> UnitState:
        with self._manager() as manager:
            return manager.unit_state(self.unit)

    def identity(self) -> Identity:
        with self._manager() as manager:
            state = manager.unit_state(self.unit)
            entry = self._entry(manager, state)
            session = entry.session_id if entry else self._pointer_session(state)
        token = {"unit": self.unit, "main_pid": str(state.main_pid),
                 "active_state": state.active_state, "invocation_id": state.invocation_id}
        if entry is not None:
            token.update(registry.process_token(entry))
        return Identity(base=self.name, token=token, running_session_id=session)

    def alive(self) -> bool:
        try:
            return self.state().running
        except (BusUnreachable, UnitNotFound):
            return False

    def switch_to(self, session_id: str, step: StepHook | None = None) -> list[str]:
        with self._manager() as manager:
            manager.unit_path(self.unit)  # no pointer change for a unit that cannot restart
            write_pointer(self.pointer, session_id)
            if step is not None:
                step("restart")
            manager.restart(self.unit, self.restart_timeout)
        return [session_id]

    def abandon_switch(self, session_id: str) -> None:
        """The unit was not restarted: its pointer names SESSION_ID again."""
        point_back(self.pointer, session_id)

    def running_session(self) -> str | None:
        with self._manager() as manager:
            return self._session(manager, manager.unit_state(self.unit))

    def start_problem(self, session_id: str) -> str:
        with self._manager() as manager:
            commands = manager.exec_start(self.unit)
            running = manager.unit_state(self.unit).running
        return start_problems(self.unit, commands, running)

    def activation_problem(self) -> str:
        """The pointer is a file this uid can replace, and systemd lets this uid restart the
        unit (asked without restarting it: `SystemdManager.may_restart`)."""
        problem = replace_problem(self.pointer)
        if problem:
            return problem
        with self._manager() as manager:
            try:
                manager.may_restart(self.unit)
            except AccessDenied as exc:
                return str(exc)
        return ""

    def stopped_from_outside(self) -> str:
        """A stop under way is waited for: until the unit is down, its processes may still
        write (Claude Code appends to its transcript as it ends)."""
        with self._manager() as manager:
            run = manager.run_state(self.unit)
            stop_job = run.job_type == "stop"
            deadline = time.monotonic() + self.restart_timeout
            while run.job_type == "stop" and time.monotonic() < deadline:
                time.sleep(STOP_POLL_SECONDS)
                run = manager.run_state(self.unit)
        return outside_stop(run, stop_job)

    def restarting(self) -> bool:
        with self._manager() as manager:
            return outside_restart(manager.run_state(self.unit))

    def switch_done(self) -> None:
        """Nothing to undo: a unit restarts on its own settings."""

    def _session(self, manager: SystemdManager, state: UnitState) -> str | None:
        entry = self._entry(manager, state)
        return entry.session_id if entry else self._pointer_session(state)

    def _entry(self, manager: SystemdManager,
               state: UnitState) -> registry.RegistryEntry | None:
        config_dir = self.claude_config_dir
        if not state.running or config_dir is None:
            return None
        pids = [process.pid for process in manager.unit_processes(self.unit)]
        return entry_in_unit(config_dir, state.main_pid, pids)

    def _pointer_session(self, state: UnitState) -> str | None:
        """Without `claude_config_dir`, the pointer is the best answer (what the running process
        was started with, as long as nobody else writes it)."""
        if not state.running or self.claude_config_dir is not None:
            return None
        try:
            return session_in(read_pointer(self.pointer))
        except PointerError:
            return None
