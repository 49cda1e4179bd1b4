"""The systemd base over a fake bus: identity, the running session, liveness and the switch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import KaelError, Refused
from kael_thread_rebuild.switching.dbus import AccessDenied, UnitNotFound
from kael_thread_rebuild.switching.factory import make_base
from kael_thread_rebuild.switching.systemd import SystemdBase, entry_in_unit, service_name
from tests.switching.sandbox import safe_config

from .fakebus import FakeBus, FakeSystemd, FakeUnit

UNIT_NAME = "kael-claude-DO-NOT-CREATE.service"
OLD = "0a0a0a0a-0000-4000-8000-00000000000a"
NEW = "0b0b0b0b-0000-4000-8000-00000000000b"
#: A pid domain that is not this process's: start times cannot be compared from here.
ELSEWHERE = "linux:0123456789abcdef:pid:[4026531836]"


@pytest.fixture
def fake() -> FakeSystemd:
    processes = [("/system.slice/u", 4242, "script -c claude"), ("/system.slice/u", 4243, "claude")]
    return FakeSystemd(units={UNIT_NAME: FakeUnit(processes=processes)})


@pytest.fixture
def bus(tmp_path: Path, fake: FakeSystemd, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBus]:
    with FakeBus(tmp_path / "system_bus_socket", fake) as server:
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", server.address)
        yield server


def _config(tmp_path: Path, **overrides: Any) -> Config:
    data: dict[str, Any] = {"activation": "systemd", "systemd_unit": UNIT_NAME,
                            "resume_pointer_path": tmp_path / "pointer-dir" / "pointer"}
    data.update(overrides)
    config = safe_config(tmp_path, **data)
    assert config.resume_pointer_path is not None
    config.resume_pointer_path.parent.mkdir(exist_ok=True)
    return config


def _register(config_dir: Path, pid: int, session_id: str, **fields: Any) -> None:
    directory = registry.registry_dir(config_dir)
    directory.mkdir(parents=True, exist_ok=True)
    entry = {"pid": pid, "sessionId": session_id, "pidDomain": ELSEWHERE, "procStart": "99",
             "startedAt": 1_000, "kind": "interactive", **fields}
    (directory / f"{pid}.json").write_text(json.dumps(entry))


# -- names and construction ----------------------------------------------------------------------


@pytest.mark.parametrize(("given", "name"), [
    ("claude", "claude.service"), ("claude.service", "claude.service"),
    ("kael@home", "kael@home.service"), ("my.app", "my.app.service"),
])
def test_unit_names_are_completed_like_systemctl_does(given: str, name: str) -> None:
    assert service_name(given) == name


def test_other_unit_types_are_refused() -> None:
    with pytest.raises(Refused, match=r"^systemd_unit 'claude\.timer' is a timer unit"):
        service_name("claude.timer")


def test_the_base_needs_a_unit(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="needs systemd_unit"):
        SystemdBase(safe_config(tmp_path))


def test_the_factory_builds_it(tmp_path: Path, bus: FakeBus) -> None:
    base = make_base(_config(tmp_path))
    assert isinstance(base, SystemdBase) and base.unit == UNIT_NAME


# -- reading -------------------------------------------------------------------------------------


def test_identity_is_the_main_pid_and_the_invocation(tmp_path: Path, bus: FakeBus) -> None:
    config = _config(tmp_path)
    assert config.claude_config_dir is not None
    _register(config.claude_config_dir, 4243, OLD)
    identity = SystemdBase(config).identity()
    assert identity.base == "systemd"
    # The Claude Code process in the unit (from another pid namespace: as registered) too.
    assert identity.token == {"unit": UNIT_NAME, "main_pid": "4242", "active_state": "active",
                              "invocation_id": bytes(range(1, 17)).hex(),
                              "claude_pid": "4243", "claude_start": "99"}
    assert identity.running_session_id == OLD


def test_a_stopped_unit_has_an_identity_but_runs_nothing(
        tmp_path: Path, bus: FakeBus, fake: FakeSystemd) -> None:
    fake.units[UNIT_NAME] = FakeUnit(active_state="inactive", sub_state="dead", main_pid=0,
                                     invocation_id=b"")
    base = SystemdBase(_config(tmp_path, claude_config_dir=None))
    (tmp_path / "pointer-dir" / "pointer").write_text(f"{OLD}\n")
    identity = base.identity()
    assert identity.token["main_pid"] == "0" and identity.token["invocation_id"] == ""
    assert identity.running_session_id is None
    assert not base.alive()


def test_alive_means_active_with_a_main_process(tmp_path: Path, bus: FakeBus,
                                                fake: FakeSystemd) -> None:
    base = SystemdBase(_config(tmp_path))
    assert base.alive()
    fake.units[UNIT_NAME] = FakeUnit(active_state="active", main_pid=0)
    assert not base.alive()


def test_not_alive_when_the_bus_or_the_unit_is_missing(
        tmp_path: Path, bus: FakeBus, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not SystemdBase(_config(tmp_path, systemd_unit="gone-DO-NOT-CREATE")).alive()
    with pytest.raises(UnitNotFound, match=r"gone-DO-NOT-CREATE\.service"):
        SystemdBase(_config(tmp_path, systemd_unit="gone-DO-NOT-CREATE")).identity()
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus-here")
    base = SystemdBase(_config(tmp_path))
    assert not base.alive()
    with pytest.raises(KaelError, match=r"^the system bus \(unix:path=.*/no-bus-here\) is "
                                        r"unreachable: no socket at "):
        base.identity()


def test_without_a_config_dir_the_pointer_names_the_session(tmp_path: Path, bus: FakeBus) -> None:
    base = SystemdBase(_config(tmp_path, claude_config_dir=None))
    pointer = tmp_path / "pointer-dir" / "pointer"
    assert base.running_session() is None  # no pointer yet
    pointer.write_text(f"{OLD}\n")
    assert base.running_session() == OLD
    pointer.write_text("not a session\n")
    assert base.running_session() is None


def test_with_a_config_dir_only_the_registry_counts(tmp_path: Path, bus: FakeBus) -> None:
    config = _config(tmp_path)
    (tmp_path / "pointer-dir" / "pointer").write_text(f"{OLD}\n")
    assert SystemdBase(config).running_session() is None  # Claude has not registered yet


# -- which registry entry ------------------------------------------------------------------------


def test_the_main_process_entry_wins(tmp_path: Path) -> None:
    _register(tmp_path, 4242, OLD, startedAt=2_000)
    _register(tmp_path, 4243, NEW, startedAt=1_000)
    entry = entry_in_unit(tmp_path, 4242, [4242, 4243])
    assert entry is not None and entry.session_id == OLD


def test_else_the_earliest_started_process_of_the_unit(tmp_path: Path) -> None:
    _register(tmp_path, 4244, NEW, startedAt=3_000)  # e.g. a `claude -p` Claude started
    _register(tmp_path, 4243, OLD, startedAt=2_000)
    _register(tmp_path, 17, NEW, startedAt=1)  # another unit's process
    entry = entry_in_unit(tmp_path, 4242, [4242, 4243, 4244])
    assert entry is not None and entry.session_id == OLD
    assert entry_in_unit(tmp_path, 4242, [4242]) is None


def test_a_stale_entry_in_this_pid_namespace_is_ignored(tmp_path: Path) -> None:
    domain = registry.pid_domain()
    start = registry.proc_start(os.getpid())
    if domain is None or start is None:
        pytest.skip("no machine id or /proc here")
    _register(tmp_path, os.getpid(), OLD, pidDomain=domain, procStart="1")
    assert entry_in_unit(tmp_path, 1, [os.getpid()]) is None
    _register(tmp_path, os.getpid(), OLD, pidDomain=domain, procStart=start)
    entry = entry_in_unit(tmp_path, 1, [os.getpid()])
    assert entry is not None and entry.session_id == OLD


# -- switching -----------------------------------------------------------------------------------


def test_switch_writes_the_pointer_then_restarts(tmp_path: Path, bus: FakeBus,
                                                 fake: FakeSystemd) -> None:
    config = _config(tmp_path)
    pointer = tmp_path / "pointer-dir" / "pointer"
    pointer.write_text(f"{OLD}\n")
    pointer.chmod(0o640)
    assert SystemdBase(config).switch_to(NEW) == [NEW]
    assert pointer.read_text() == f"{NEW}\n"
    assert pointer.stat().st_mode & 0o777 == 0o640
    assert fake.restarted == [UNIT_NAME]
    assert fake.calls[-4:] == ["GetNameOwner", "AddMatch", "Subscribe", "RestartUnit"]


def test_a_missing_unit_leaves_the_pointer_alone(tmp_path: Path, bus: FakeBus,
                                                 fake: FakeSystemd) -> None:
    base = SystemdBase(_config(tmp_path, systemd_unit="gone-DO-NOT-CREATE.service"))
    with pytest.raises(UnitNotFound):
        base.switch_to(NEW)
    assert not (tmp_path / "pointer-dir" / "pointer").exists()
    assert fake.restarted == []


def test_no_restart_for_something_that_is_not_a_session_id(tmp_path: Path, bus: FakeBus,
                                                          fake: FakeSystemd) -> None:
    with pytest.raises(Refused, match="not a session id"):
        SystemdBase(_config(tmp_path)).switch_to("../../etc/passwd")
    assert fake.restarted == []


def test_a_refused_restart_is_reported(tmp_path: Path, bus: FakeBus, fake: FakeSystemd) -> None:
    fake.errors["RestartUnit"] = "org.freedesktop.DBus.Error.AccessDenied"
    with pytest.raises(AccessDenied, match=rf"^access denied on the system bus .* to restart "
                                           rf"{UNIT_NAME}"):
        SystemdBase(_config(tmp_path)).switch_to(NEW)


def test_user_units_go_over_the_user_bus(tmp_path: Path, bus: FakeBus,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-system-bus")
    base = SystemdBase(_config(tmp_path, systemd_bus="user"))
    assert base.bus_label.startswith("the user bus (")
    assert base.alive()
