"""The D-Bus client: addresses, messages and replies (pure), then its I/O against a fake bus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jeepney import (
    DBusAddress,
    HeaderFields,
    Message,
    MessageType,
    new_error,
    new_method_call,
    new_signal,
)

from kael_thread_rebuild.config import SystemdBus
from kael_thread_rebuild.switching import dbus
from kael_thread_rebuild.switching.dbus import (
    MANAGER,
    MANAGER_PATH,
    PROPERTIES,
    SYSTEMD,
    AccessDenied,
    BusUnreachable,
    JobFailed,
    SystemdError,
    SystemdManager,
    UnitNotFound,
)

from .fakebus import FakeBus, FakeSystemd, FakeUnit

UNIT_NAME = "kael-DO-NOT-CREATE.service"

# -- addresses -----------------------------------------------------------------------------------


def test_the_system_bus_address() -> None:
    assert dbus.bus_address(SystemdBus.system, {}) == "unix:path=/run/dbus/system_bus_socket"
    env = {"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/mnt/bus"}
    assert dbus.bus_address(SystemdBus.system, env) == "unix:path=/mnt/bus"


def test_the_user_bus_address() -> None:
    session = {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/s", "XDG_RUNTIME_DIR": "/x"}
    assert dbus.bus_address(SystemdBus.user, session) == "unix:path=/s"
    assert dbus.bus_address(SystemdBus.user, {"XDG_RUNTIME_DIR": "/x"}) == "unix:path=/x/bus"
    assert dbus.bus_address(SystemdBus.user, {}, uid=1000) == "unix:path=/run/user/1000/bus"


def test_socket_paths() -> None:
    assert dbus.socket_path("unix:path=/a,guid=00;unix:path=/b") == "/a"
    assert dbus.socket_path("unix:abstract=/tmp/dbus-x") == "\0/tmp/dbus-x"
    assert dbus.socket_path("unix:path=/run/user/1000/b%2cus") == "/run/user/1000/b,us"
    for address in ("tcp:host=localhost,port=1", "nonsense"):
        with pytest.raises(BusUnreachable, match="names no unix socket"):
            dbus.socket_path(address)


# -- messages --------------------------------------------------------------------------------


def _wire(message: Message) -> Message:
    """MESSAGE as the bus reads it: serialised and parsed back."""
    return Message.from_buffer(message.serialise(serial=7))


def _fields(message: Message) -> tuple[object, ...]:
    f = message.header.fields
    return (f.get(HeaderFields.destination), f.get(HeaderFields.path),
            f.get(HeaderFields.interface), f.get(HeaderFields.member),
            f.get(HeaderFields.signature))


@pytest.mark.parametrize(("message", "fields", "body"), [
    (dbus.load_unit(UNIT_NAME), (SYSTEMD, MANAGER_PATH, MANAGER, "LoadUnit", "s"), (UNIT_NAME,)),
    (dbus.restart_unit(UNIT_NAME), (SYSTEMD, MANAGER_PATH, MANAGER, "RestartUnit", "ss"),
     (UNIT_NAME, "replace")),
    (dbus.get_unit_processes(UNIT_NAME),
     (SYSTEMD, MANAGER_PATH, MANAGER, "GetUnitProcesses", "s"), (UNIT_NAME,)),
    (dbus.get_property("/org/freedesktop/systemd1/unit/x", dbus.SERVICE, "MainPID"),
     (SYSTEMD, "/org/freedesktop/systemd1/unit/x", PROPERTIES, "Get", "ss"),
     (dbus.SERVICE, "MainPID")),
    (dbus.subscribe(), (SYSTEMD, MANAGER_PATH, MANAGER, "Subscribe", None), ()),
])
def test_method_calls(message: Message, fields: tuple[object, ...],
                      body: tuple[object, ...]) -> None:
    parsed = _wire(message)
    assert parsed.header.message_type is MessageType.method_call
    assert _fields(parsed) == fields
    assert parsed.body == body


def test_the_job_signal_rule() -> None:
    rule = dbus.job_removed_rule()
    assert rule.serialise() == ("interface='org.freedesktop.systemd1.Manager',"
                                "member='JobRemoved',path='/org/freedesktop/systemd1',"
                                "type='signal'")
    signal = _job_removed(3, "done")
    assert rule.matches(_wire(signal))
    other = new_signal(DBusAddress(MANAGER_PATH, interface=MANAGER), "UnitNew", "so",
                       (UNIT_NAME, "/u"))
    assert not rule.matches(_wire(other))


def _job_removed(job: int, result: str, unit: str = UNIT_NAME) -> Message:
    return new_signal(DBusAddress(MANAGER_PATH, interface=MANAGER), "JobRemoved", "uoss",
                      (job, f"{MANAGER_PATH}/job/{job}", unit, result))


def test_job_removed_is_parsed() -> None:
    removed = dbus.parse_job_removed(_wire(_job_removed(12, "failed")))
    assert removed == dbus.JobRemoved(id=12, job=f"{MANAGER_PATH}/job/12", unit=UNIT_NAME,
                                      result="failed")
    odd = new_signal(DBusAddress(MANAGER_PATH, interface=MANAGER), "JobRemoved", "s", ("x",))
    assert dbus.parse_job_removed(_wire(odd)) is None


def test_replies_are_read() -> None:
    assert dbus.variant_value((("u", 4242),)) == 4242
    assert dbus.invocation_hex(bytes(range(16))) == bytes(range(16)).hex()
    assert dbus.invocation_hex(bytes(16)) == ""
    assert dbus.invocation_hex(b"") == ""
    processes = dbus.parse_processes(([("/system.slice/x.service", 7, "claude --resume a")],))
    assert processes == [dbus.UnitProcess(cgroup="/system.slice/x.service", pid=7,
                                          cmdline="claude --resume a")]


def test_error_replies() -> None:
    call = _wire(new_method_call(DBusAddress(MANAGER_PATH, SYSTEMD, MANAGER), "RestartUnit"))
    error = _wire(new_error(call, "org.freedesktop.DBus.Error.AccessDenied", "s", ("no",)))
    assert dbus.error_name(error) == "org.freedesktop.DBus.Error.AccessDenied"
    assert dbus.error_text(error) == "no"
    assert dbus.error_name(call) is None


@pytest.mark.parametrize(("name", "kind", "start"), [
    ("org.freedesktop.DBus.Error.AccessDenied", AccessDenied, "access denied on BUS to restart"),
    ("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired", AccessDenied,
     "access denied on BUS"),
    ("org.freedesktop.systemd1.NoSuchUnit", UnitNotFound, "systemd on BUS has no unit U"),
    ("org.freedesktop.DBus.Error.ServiceUnknown", BusUnreachable, "no systemd on BUS"),
    ("org.freedesktop.systemd1.UnitMasked", SystemdError, "systemd on BUS refused to restart"),
])
def test_errors_are_explained_in_one_line(name: str, kind: type[SystemdError],
                                          start: str) -> None:
    error = dbus.explain(name, "why", "restart U", "U", "BUS")
    assert type(error) is kind
    assert str(error).startswith(start)
    assert "\n" not in str(error)


# -- the client against a fake bus ---------------------------------------------------------------


@pytest.fixture
def fake() -> FakeSystemd:
    processes = [("/system.slice/x", 4242, "script"), ("/system.slice/x", 4243, "claude")]
    return FakeSystemd(units={UNIT_NAME: FakeUnit(processes=processes)})


@pytest.fixture
def bus(tmp_path: Path, fake: FakeSystemd) -> Iterator[FakeBus]:
    with FakeBus(tmp_path / "bus", fake) as server:
        yield server


def _manager(bus: FakeBus) -> SystemdManager:
    return SystemdManager(bus.address, "the fake bus", call_timeout=2.0)


def test_state_and_processes(bus: FakeBus) -> None:
    with _manager(bus) as manager:
        state = manager.unit_state(UNIT_NAME)
        assert state.running and state.main_pid == 4242
        assert state.invocation_id == bytes(range(1, 17)).hex()
        assert [p.pid for p in manager.unit_processes(UNIT_NAME)] == [4242, 4243]


def test_a_missing_unit(bus: FakeBus) -> None:
    with _manager(bus) as manager, pytest.raises(
            UnitNotFound, match=r"^systemd on the fake bus cannot use unit nope\.service: "
                                r"LoadState is not-found \(no such unit file\)$"):
        manager.unit_path("nope.service")


@pytest.mark.parametrize("order", ["reply-first", "signal-first", "spoofed"])
def test_restart_waits_for_its_own_job(bus: FakeBus, fake: FakeSystemd, order: str) -> None:
    fake.restart = order
    with _manager(bus) as manager:
        removed = manager.restart(UNIT_NAME, timeout=2.0)
    assert removed.result == "done" and removed.unit == UNIT_NAME
    assert fake.calls[-4:] == ["GetNameOwner", "AddMatch", "Subscribe", "RestartUnit"]


def test_a_spoofed_done_does_not_hide_a_failure(bus: FakeBus, fake: FakeSystemd) -> None:
    fake.restart, fake.job_result = "spoofed", "dependency"
    with _manager(bus) as manager, pytest.raises(
            JobFailed, match=rf"^restarting {UNIT_NAME} failed: the job ended with result "
                             r"'dependency' \(see journalctl -u "):
        manager.restart(UNIT_NAME, timeout=2.0)


def test_a_job_that_never_ends(bus: FakeBus, fake: FakeSystemd) -> None:
    fake.restart = "never"
    with _manager(bus) as manager, pytest.raises(
            JobFailed, match=r"did not finish within 0\.3 s \(job /org/freedesktop/systemd1/job/1"):
        manager.restart(UNIT_NAME, timeout=0.3)


def test_access_denied_on_restart(bus: FakeBus, fake: FakeSystemd) -> None:
    fake.errors["RestartUnit"] = "org.freedesktop.DBus.Error.AccessDenied"
    with _manager(bus) as manager, pytest.raises(
            AccessDenied, match=rf"^access denied on the fake bus to restart {UNIT_NAME}: "
                                r"fake RestartUnit refused; this uid may not manage"):
        manager.restart(UNIT_NAME, timeout=2.0)


def test_an_already_subscribed_client_still_restarts(bus: FakeBus, fake: FakeSystemd) -> None:
    fake.errors["Subscribe"] = "org.freedesktop.systemd1.AlreadySubscribed"
    with _manager(bus) as manager:
        assert manager.restart(UNIT_NAME, timeout=2.0).result == "done"


def test_unreachable_buses(tmp_path: Path) -> None:
    with pytest.raises(BusUnreachable, match=r"^the bus is unreachable: no socket at "):
        SystemdManager(f"unix:path={tmp_path}/none", "the bus").__enter__()
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(BusUnreachable, match=r"^the bus is unreachable at .*: Connection refused"):
        SystemdManager(f"unix:path={plain}", "the bus").__enter__()


def test_a_refused_authentication(bus: FakeBus, fake: FakeSystemd) -> None:
    fake.reject_auth = True
    with pytest.raises(AccessDenied, match=r"^the fake bus refused this uid"):
        _manager(bus).__enter__()
