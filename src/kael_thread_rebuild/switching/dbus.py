"""A small blocking client for systemd's manager on D-Bus, over jeepney (pure Python).

Only what the systemd base needs: load a unit, read its state and its processes, ask whether this
uid may restart it, restart it and wait for the restart job's result. Messages are built and read
by pure functions; `SystemdManager` sends them. Use one connection per task (`with
SystemdManager(...) as manager:`): a connection held for days would outlive a restarted bus
broker.

Every failure is a `SystemdError` whose message is one line naming the bus, the unit and what to
do about it.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from jeepney import (  # type: ignore[import-untyped]
    AuthenticationError,
    DBusAddress,
    HeaderFields,
    MatchRule,
    Message,
    MessageType,
    message_bus,
    new_method_call,
)
from jeepney.bus import get_connectable_addresses  # type: ignore[import-untyped]
from jeepney.io.blocking import DBusConnection, prep_socket  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, ValidationError

from ..config import SystemdBus
from ..errors import KaelError

SYSTEMD = "org.freedesktop.systemd1"
MANAGER_PATH = "/org/freedesktop/systemd1"
MANAGER = "org.freedesktop.systemd1.Manager"
UNIT = "org.freedesktop.systemd1.Unit"
SERVICE = "org.freedesktop.systemd1.Service"
JOB = "org.freedesktop.systemd1.Job"
PROPERTIES = "org.freedesktop.DBus.Properties"

SYSTEM_BUS_DEFAULT = "unix:path=/run/dbus/system_bus_socket"
CALL_TIMEOUT_SECONDS = 10.0
AUTH_TIMEOUT_SECONDS = 5.0

_ACCESS_DENIED = frozenset({
    "org.freedesktop.DBus.Error.AccessDenied",
    "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
})
#: What systemd answers a restart in job mode "isolate", once it has checked that the caller may
#: restart the unit (polkit's `manage-units` with the unit and verb "restart", as for the switch's
#: own RestartUnit): "Isolate is only valid for start.", and no job is queued. polkit itself cannot
#: be asked the same question by this uid: only root may pass it the unit and verb a rule reads.
PROBE_MODE = "isolate"
_PROBE_REFUSED = frozenset({"org.freedesktop.DBus.Error.InvalidArgs"})
_JOB_GONE = frozenset({"org.freedesktop.DBus.Error.UnknownObject",
                       "org.freedesktop.DBus.Error.UnknownMethod"})
_NO_UNIT = frozenset({"org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed"})
_SUBSCRIBED = frozenset({"org.freedesktop.systemd1.AlreadySubscribed"})
_NO_SYSTEMD = frozenset({
    "org.freedesktop.DBus.Error.ServiceUnknown",
    "org.freedesktop.DBus.Error.NameHasNoOwner",
})


class SystemdError(KaelError):
    """systemd could not be asked, or refused."""


class BusUnreachable(SystemdError):
    """No bus at the address, or no systemd on it."""


class UnitNotFound(SystemdError):
    """systemd knows no such unit (or cannot load it)."""


class AccessDenied(SystemdError):
    """The bus or systemd refused this uid."""


class JobFailed(SystemdError):
    """The restart job ended with another result than "done", or did not end in time."""


class UnitState(BaseModel):
    """What the base reads of a service unit."""

    model_config = ConfigDict(frozen=True)

    name: str
    load_state: str
    active_state: str
    sub_state: str
    main_pid: int
    invocation_id: str

    @property
    def running(self) -> bool:
        return self.active_state == "active" and self.main_pid > 0


class RunState(BaseModel):
    """How a service unit's last run went and what systemd is doing with it now: what tells a
    stop or a restart from outside (an admin's systemctl) from a crash."""

    model_config = ConfigDict(frozen=True)

    active_state: str
    sub_state: str
    result: str  # Service.Result: "success" unless the last run failed (reset by each start)
    restarts: int  # NRestarts: automatic restarts (Restart=) since the last start from outside
    job_type: str  # the unit's pending job ("stop", "restart", "start"…), "" when none


class UnitProcess(BaseModel):
    model_config = ConfigDict(frozen=True)

    cgroup: str
    pid: int
    cmdline: str


class ExecCommand(BaseModel):
    """One `ExecStart=` line as systemd reports it, with its last run (pid 0: never run)."""

    model_config = ConfigDict(frozen=True)

    path: str
    argv: list[str]
    pid: int


class JobRemoved(BaseModel):
    """The `JobRemoved(u id, o job, s unit, s result)` signal."""

    model_config = ConfigDict(frozen=True)

    id: int
    job: str
    unit: str
    result: str


# -- addresses -----------------------------------------------------------------------------------


def bus_address(kind: SystemdBus, environ: Mapping[str, str] | None = None,
                uid: int | None = None) -> str:
    """The D-Bus address of KIND: the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard
    socket) or the user's bus (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`, else
    `/run/user/<uid>/bus`, which is where systemd puts it)."""
    env = os.environ if environ is None else environ
    if kind is SystemdBus.system:
        return env.get("DBUS_SYSTEM_BUS_ADDRESS") or SYSTEM_BUS_DEFAULT
    if env.get("DBUS_SESSION_BUS_ADDRESS"):
        return env["DBUS_SESSION_BUS_ADDRESS"]
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid() if uid is None else uid}"
    return f"unix:path={runtime}/bus"


def socket_path(address: str) -> str:
    """The first connectable socket of a D-Bus ADDRESS (abstract sockets start with NUL)."""
    try:
        return str(next(get_connectable_addresses(address)))
    except (RuntimeError, ValueError, StopIteration):
        raise BusUnreachable(f"D-Bus address {address!r} names no unix socket this engine can "
                             "use (only unix:path= and unix:abstract= are supported)") from None


# -- messages (pure) -----------------------------------------------------------------------------


def _call(path: str, interface: str, method: str, signature: str | None = None,
          body: tuple[Any, ...] = ()) -> Message:
    return new_method_call(DBusAddress(path, bus_name=SYSTEMD, interface=interface), method,
                           signature, body)


def load_unit(unit: str) -> Message:
    """`LoadUnit` answers for units that are not loaded yet too (`GetUnit` would not)."""
    return _call(MANAGER_PATH, MANAGER, "LoadUnit", "s", (unit,))


def get_property(path: str, interface: str, name: str) -> Message:
    return _call(path, PROPERTIES, "Get", "ss", (interface, name))


def get_unit_processes(unit: str) -> Message:
    return _call(MANAGER_PATH, MANAGER, "GetUnitProcesses", "s", (unit,))


def restart_unit(unit: str, mode: str = "replace") -> Message:
    return _call(MANAGER_PATH, MANAGER, "RestartUnit", "ss", (unit, mode))


def subscribe() -> Message:
    """systemd emits job signals only while some client is subscribed."""
    return _call(MANAGER_PATH, MANAGER, "Subscribe")


def job_removed_rule() -> MatchRule:
    # No sender: the signal's header carries systemd's unique name, not the well-known one, so a
    # sender here would never match locally; the sender is checked against the owner instead.
    return MatchRule(type="signal", interface=MANAGER, member="JobRemoved", path=MANAGER_PATH)


# -- replies (pure) ------------------------------------------------------------------------------


def error_name(message: Message) -> str | None:
    if message.header.message_type is not MessageType.error:
        return None
    return str(message.header.fields.get(HeaderFields.error_name, "?"))


def error_text(message: Message) -> str:
    body = message.body
    return str(body[0]) if body and isinstance(body[0], str) else ""


def explain(name: str, text: str, doing: str, unit: str, bus: str) -> SystemdError:
    """The one-line error for a D-Bus error NAME with TEXT, met while DOING."""
    detail = f": {text}" if text else ""
    if name in _ACCESS_DENIED:
        return AccessDenied(
            f"access denied on {bus} to {doing}{detail}; this uid may not manage {unit} (root "
            "may; otherwise a polkit rule for this uid, or make it a user unit of this uid on "
            "the user bus)")
    if name in _NO_UNIT:
        return UnitNotFound(f"systemd on {bus} has no unit {unit}{detail}")
    if name in _NO_SYSTEMD:
        return BusUnreachable(f"no systemd on {bus} ({name}); check systemd_bus and the "
                              "mounted bus socket")
    return SystemdError(f"systemd on {bus} refused to {doing}: {name}{detail}")


def variant_value(body: tuple[Any, ...]) -> Any:
    """The value of a `Properties.Get` reply, whose body is one variant `(signature, value)`."""
    return body[0][1]


def invocation_hex(value: Any) -> str:
    """`InvocationID` is 16 bytes (all zero, or empty, when the unit has not run)."""
    raw = bytes(value)
    return "" if not any(raw) else raw.hex()


def parse_processes(body: tuple[Any, ...]) -> list[UnitProcess]:
    """`GetUnitProcesses` answers `a(sus)`: control group, pid, command line."""
    return [UnitProcess(cgroup=cgroup, pid=pid, cmdline=cmdline)
            for cgroup, pid, cmdline in body[0]]


def parse_exec_commands(value: Any) -> list[ExecCommand]:
    """`ExecStart` is `a(sasbttttuii)`: path, argv, ignore errors, four time stamps, the pid of
    the last run, its exit code and status."""
    return [ExecCommand(path=item[0], argv=list(item[1]), pid=item[7]) for item in value]


def parse_job_removed(message: Message) -> JobRemoved | None:
    """The signal's fields, or None for a message that is not a well-formed JobRemoved."""
    body = message.body
    if len(body) != 4:
        return None
    try:
        return JobRemoved(id=body[0], job=body[1], unit=body[2], result=body[3])
    except ValidationError:
        return None


def sender(message: Message) -> str | None:
    value = message.header.fields.get(HeaderFields.sender)
    return None if value is None else str(value)


# -- the client ----------------------------------------------------------------------------------


class SystemdManager:
    """One connection to systemd on a bus; a context manager."""

    def __init__(self, address: str, label: str, *,
                 call_timeout: float = CALL_TIMEOUT_SECONDS) -> None:
        self.address = address
        self.label = label  # e.g. "the system bus (unix:path=...)", for messages
        self.call_timeout = call_timeout
        self._conn: Any = None

    def __enter__(self) -> SystemdManager:
        path = socket_path(self.address)
        shown = path.replace("\0", "@")
        try:
            sock = prep_socket(path, timeout=AUTH_TIMEOUT_SECONDS)
            sock.settimeout(self.call_timeout)  # bounds writes; reads are bounded per call
            self._conn = DBusConnection(sock)
        except FileNotFoundError:
            raise BusUnreachable(f"{self.label} is unreachable: no socket at {shown}") from None
        except PermissionError:
            raise AccessDenied(f"{self.label} is unreachable: permission denied on {shown}") \
                from None
        except AuthenticationError as exc:
            raise AccessDenied(f"{self.label} refused this uid ({exc})") from None
        except TimeoutError:
            raise BusUnreachable(f"{self.label} did not answer at {shown} within "
                                 f"{max(self.call_timeout, AUTH_TIMEOUT_SECONDS):g} s") from None
        except OSError as exc:
            raise BusUnreachable(f"{self.label} is unreachable at {shown}: "
                                 f"{exc.strerror or exc}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _send(self, message: Message, doing: str, unit: str = "",
              tolerate: frozenset[str] = frozenset()) -> tuple[Any, ...]:
        """The reply's body; an error reply raises, unless its name is in TOLERATE (empty body)."""
        try:
            reply = self._conn.send_and_get_reply(message, timeout=self.call_timeout)
        except TimeoutError:
            raise SystemdError(f"systemd on {self.label} did not answer within "
                               f"{self.call_timeout:g} s while trying to {doing}") from None
        except OSError as exc:
            raise BusUnreachable(f"lost {self.label} while trying to {doing}: "
                                 f"{exc.strerror or exc}") from None
        name = error_name(reply)
        if name in tolerate:
            return ()
        if name is not None:
            raise explain(name, error_text(reply), doing, unit or "the unit", self.label)
        return tuple(reply.body)

    def unit_path(self, unit: str) -> str:
        """The unit's object path; UnitNotFound unless its file is loaded."""
        path = str(self._send(load_unit(unit), f"load {unit}", unit)[0])
        load_state = self._property(path, UNIT, "LoadState", unit)
        if load_state != "loaded":
            hint = {"not-found": "no such unit file", "masked": "the unit is masked"}.get(
                str(load_state), "see systemctl status")
            raise UnitNotFound(f"systemd on {self.label} cannot use unit {unit}: LoadState is "
                               f"{load_state} ({hint})")
        return path

    def _property(self, path: str, interface: str, name: str, unit: str) -> Any:
        body = self._send(get_property(path, interface, name), f"read {name} of {unit}", unit)
        return variant_value(body)

    def unit_state(self, unit: str) -> UnitState:
        path = self.unit_path(unit)

        def read(interface: str, name: str) -> Any:
            return self._property(path, interface, name, unit)

        return UnitState(name=unit, load_state="loaded", active_state=read(UNIT, "ActiveState"),
                         sub_state=read(UNIT, "SubState"), main_pid=read(SERVICE, "MainPID"),
                         invocation_id=invocation_hex(read(UNIT, "InvocationID")))

    def run_state(self, unit: str) -> RunState:
        path = self.unit_path(unit)

        def read(interface: str, name: str) -> Any:
            return self._property(path, interface, name, unit)

        job_id, job_path = read(UNIT, "Job")
        job_type = ""
        if job_id:  # a job that ended meanwhile is no job
            body = self._send(get_property(job_path, JOB, "JobType"), f"read the job of {unit}",
                              unit, tolerate=_JOB_GONE)
            job_type = str(variant_value(body)) if body else ""
        return RunState(active_state=read(UNIT, "ActiveState"), sub_state=read(UNIT, "SubState"),
                        result=read(SERVICE, "Result"), restarts=read(SERVICE, "NRestarts"),
                        job_type=job_type)

    def exec_start(self, unit: str) -> list[ExecCommand]:
        """The unit's `ExecStart=` commands, each with its last run."""
        path = self.unit_path(unit)
        return parse_exec_commands(self._property(path, SERVICE, "ExecStart", unit))

    def unit_processes(self, unit: str) -> list[UnitProcess]:
        """Every process in the unit's control group (pids in systemd's pid namespace)."""
        body = self._send(get_unit_processes(unit), f"list the processes of {unit}", unit)
        return parse_processes(body)

    def may_restart(self, unit: str) -> None:
        """Whether this uid may restart UNIT, asked the way the switch restarts it and answered
        by systemd without restarting anything (`PROBE_MODE`); AccessDenied when it may not."""
        job = self._send(restart_unit(unit, PROBE_MODE), f"restart {unit}", unit,
                         tolerate=_PROBE_REFUSED)
        if job:  # never seen: a systemd that queued it would restart the unit
            raise SystemdError(f"systemd on {self.label} accepted a restart of {unit} in job mode "
                               f"{PROBE_MODE!r} (job {job[0]}); it cannot be asked whether this "
                               "uid may restart the unit")

    def restart(self, unit: str, timeout: float) -> JobRemoved:
        """Restart UNIT and wait until its job is removed; JobFailed unless the result is "done"."""
        owner = str(self._send(message_bus.GetNameOwner(SYSTEMD), "find systemd on the bus")[0])
        rule = job_removed_rule()
        signals: deque[Message] = deque()
        # The filter and the match go first: the job may end before RestartUnit's reply arrives.
        with self._conn.filter(rule, queue=signals):
            self._send(message_bus.AddMatch(rule), "watch systemd's jobs")
            self._send(subscribe(), "subscribe to systemd's signals", tolerate=_SUBSCRIBED)
            job = str(self._send(restart_unit(unit), f"restart {unit}", unit)[0])
            deadline = time.monotonic() + timeout
            while True:
                while signals:
                    message = signals.popleft()
                    removed = parse_job_removed(message)
                    if removed is not None and removed.job == job and sender(message) == owner:
                        if removed.result != "done":
                            raise JobFailed(f"restarting {unit} failed: the job ended with result "
                                            f"{removed.result!r} (see journalctl -u {unit})")
                        return removed
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise JobFailed(f"restarting {unit} did not finish within {timeout:g} s "
                                    f"(job {job} still queued or running)")
                try:
                    self._conn.recv_messages(timeout=min(remaining, self.call_timeout))
                except TimeoutError:
                    continue
                except OSError as exc:
                    raise BusUnreachable(f"lost {self.label} while waiting for the restart of "
                                         f"{unit}: {exc.strerror or exc}") from None
