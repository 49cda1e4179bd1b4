"""The verify of the systemd households after the install and the live drill: the config names
the unit the Claude process runs in, its bus and the pointer claude-start reads (the inventory
named none of them); the daemon reaches that bus and pointer dir and nothing else of systemd;
the unit's first start with an empty pointer was a new session, never a restart loop; and after
the drill's switch and rollback the unit runs the old session again with the unit's own flags.
Everything read as JSON (busctl, journalctl, docker inspect, the registry)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from conftest import SERVER, config_of, home_of, instances, read_json, run_json

UNIT_IFACE = "org.freedesktop.systemd1.Unit"
SERVICE_IFACE = "org.freedesktop.systemd1.Service"


def units(host: Any) -> list[dict[str, Any]]:
    found = [place for place in instances(host) if place["base"] == "systemd"]
    if not found:
        pytest.skip("no systemd instance on this household")
    return found


def manager(host: Any, place: dict[str, Any], *argv: str) -> list[str]:
    """ARGV for the manager of PLACE's unit: root's for a system unit, the user's own."""
    if place["bus"] == "system":
        return list(argv)
    uid = host.user(place["user"]).uid
    return ["runuser", "-u", place["user"], "--", "env", f"XDG_RUNTIME_DIR=/run/user/{uid}",
            argv[0], "--user", *argv[1:]]


def unit_property(host: Any, place: dict[str, Any], iface: str, name: str) -> Any:
    path = "/org/freedesktop/systemd1/unit/" + "".join(
        ch if ch.isalnum() else f"_{ord(ch):02x}" for ch in place["unit"])
    found = run_json(host, *manager(host, place, "busctl", "--json=short", "get-property",
                                    "org.freedesktop.systemd1", path, iface, name))
    return found["data"]


def exec_start(host: Any, place: dict[str, Any]) -> list[str]:
    """The unit's ExecStart as an argv: (path, argv, ignore) over D-Bus."""
    (command,) = unit_property(host, place, SERVICE_IFACE, "ExecStart")
    return [command[0], *command[1][1:]]


def registry(host: Any, user: str) -> list[dict[str, Any]]:
    sessions = f"{home_of(host, user)}/.claude/sessions"
    names = host.run("ls %s", sessions).stdout.split()
    found = [read_json(host, f"{sessions}/{name}") for name in names if name.endswith(".json")]
    return [entry for entry in found if host.file(f"/proc/{entry['pid']}").exists]


def test_the_config_names_the_unit_its_bus_and_the_pointer_claude_start_reads(
        host: Any) -> None:
    for place in units(host):
        config = config_of(host, place["instance"])
        start = exec_start(host, place)
        assert config["activation"] == "systemd"
        assert (config["systemd_unit"], config["systemd_bus"]) == (place["unit"], place["bus"])
        assert start[0].endswith("/claude-start") and start[2] == "--", start
        assert config["resume_pointer_path"] == start[1]


def test_the_daemon_reaches_the_bus_and_the_pointer_dir_only(host: Any) -> None:
    for place in units(host):
        config = config_of(host, place["instance"])
        (daemon,) = run_json(host, "docker", "inspect", f"{SERVER}-{place['instance']}")
        mounts = {m["Destination"]: m for m in daemon["Mounts"]}
        uid = host.user(place["user"]).uid
        bus = "/run/dbus" if place["bus"] == "system" else f"/run/user/{uid}"
        pointer_dir = config["resume_pointer_path"].rsplit("/", 1)[0]
        for path in (bus, pointer_dir):
            assert mounts[path]["Source"] == path and mounts[path]["RW"], mounts.get(path)
        others = [p for p in mounts if p.startswith("/run/") and p != bus]
        assert others in ([], ["/run/systemd/system"]), others
        folder = host.file(pointer_dir)
        assert folder.user == place["user"] and not folder.mode & 0o077, (folder.user, folder.mode)


def test_the_first_start_was_a_new_session_not_a_restart_loop(host: Any) -> None:
    for place in units(host):
        assert int(unit_property(host, place, SERVICE_IFACE, "NRestarts")) == 0
        assert unit_property(host, place, UNIT_IFACE, "ActiveState") == "active"
        field = "_SYSTEMD_UNIT" if place["bus"] == "system" else "_SYSTEMD_USER_UNIT"
        journal = host.run(shlex.join(["journalctl", "--no-pager", "-o", "json",
                                       f"{field}={place['unit']}"]))
        said = [json.loads(line).get("MESSAGE") for line in journal.stdout.splitlines()]
        starts = [m for m in said if isinstance(m, str) and m.startswith("claude-start: ")]
        assert starts and starts[0].startswith("claude-start: no session in "), starts
        assert all("refusing" not in m for m in starts), starts


def test_after_the_rollback_the_unit_runs_the_old_session_with_its_own_flags(
        host: Any) -> None:
    for place in units(host):
        drill = read_json(host, f"/var/lib/kael-molecule/drill-{place['instance']}.json")
        config = config_of(host, place["instance"])
        pointer = host.file(config["resume_pointer_path"]).content_string.strip()
        (live,) = registry(host, place["user"])
        main_pid = int(unit_property(host, place, SERVICE_IFACE, "MainPID"))
        argv = host.file(f"/proc/{live['pid']}/cmdline").content_string.split("\0")[:-1]
        status = host.file(f"/proc/{live['pid']}/status").content_string
        assert pointer == live["sessionId"] == drill["old_session"]
        # claude-start's script(1) is the main process; Claude Code its child.
        assert re.search(rf"^PPid:\s+{main_pid}$", status, re.MULTILINE), (main_pid, status)
        assert argv[1:3] == ["--resume", drill["old_session"]]
        assert argv[3:] == exec_start(host, place)[3:] == shlex.split(place["start_command"])[1:]
