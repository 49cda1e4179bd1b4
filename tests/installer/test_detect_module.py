"""claude_detect against a stand-in household: a fake `claude` in a private tmux server, a fake
pointer runner; ambiguity and absence fail naming what was seen."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.guard import MARK
from tests.installer.conftest import (
    INCIDENT_FLAGS,
    VENV_BIN,
    Household,
    RunModule,
    ansible_env,
)
from tests.support.claude_env import claude_available, find_claude_binary, make_claude_env
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import cmdline, wait_until
from tests.systemd.household import USER_NAME, USER_UID, docker_reachable
from tests.systemd.household import Household as SystemdHousehold

R = "{session_id}"
INCIDENT = "claude --continue " + shlex.join(INCIDENT_FLAGS)


def detect(run_module: RunModule, place: Household, **extra: Any) -> dict[str, Any]:
    return run_module("claude_detect", {"name": "test", "tmux_socket": place.socket,
                                        "claude_config_dir": str(place.config_dir), **extra})


def resume_of(run_module: RunModule, found: dict[str, Any]) -> dict[str, Any]:
    start = found["start_command"]
    return run_module("claude_start_command", {
        start["kind"]: start["value"], "shell": found["tmux"].get("shell", "/bin/sh"),
        "claude": found["claude_cli"][-1], "fallback_to_live": True,
        **({"live_pid": found["pid"]} if found["base"] != "pointer" else {})})


def test_finds_the_tmux_instance_and_everything_about_it(run_module: RunModule,
                                                         household: Household) -> None:
    pid = household.start_claude(INCIDENT)
    found = detect(run_module, household)
    assert found["base"] == "tmux" and found["pid"] == pid
    assert found["tmux"]["target"] == "DO-NOT-CREATE-cc:0.0"
    assert found["tmux"]["socket"].endswith("/" + household.socket)
    assert found["claude_workdir"] == os.path.realpath(household.workdir)
    assert found["claude_config_dir"] == str(household.config_dir)
    assert found["claude_config_dir_from_env"] is True
    assert found["claude_home"] == str(household.home)
    assert found["project_dir"] == str(household.project_dir) and found["project_dir_exists"]
    assert found["session_id"] == household.session_id
    assert found["claude_cli"] == [str(household.bin / "claude")]
    assert found["start_command"] == {"kind": "tmux_start_command", "value": f'"{INCIDENT}"'}
    resume = resume_of(run_module, found)
    # The pane's command says `claude`; the program is recorded as the path the live process's
    # own PATH finds (the switch runs it where that PATH does not apply).
    assert str(household.bin) not in os.environ.get("PATH", "")
    assert resume["resume_command"] == [str(household.bin / "claude"), "--resume", R,
                                        *INCIDENT_FLAGS]
    assert resume["live_checked"]


@pytest.mark.parametrize("key", ["socket_path", "target", "pane_id", "pid", "workdir"])
def test_every_narrowing_finds_it(run_module: RunModule, household: Household, key: str) -> None:
    pid = household.start_claude(INCIDENT)
    first = detect(run_module, household)
    extra = {"socket_path": {"tmux_socket": first["tmux"]["socket"]},
             "target": {"tmux_target": "DO-NOT-CREATE-cc:0.0"},
             "pane_id": {"tmux_target": first["tmux"]["pane_id"]},
             "pid": {"pid": pid},
             "workdir": {"claude_workdir": str(household.workdir), "base": "tmux"}}[key]
    assert detect(run_module, household, **extra)["pid"] == pid


def test_two_matches_fail_naming_both(run_module: RunModule, household: Household) -> None:
    first = household.start_claude(INCIDENT, name="one")
    second = household.start_claude("claude --model opus", name="two")
    result = detect(run_module, household)
    assert result["failed"] and "2 Claude Code processes match" in result["msg"]
    assert f"pid {first} " in result["msg"] and f"pid {second} " in result["msg"]
    assert "DO-NOT-CREATE-two:0.0" in result["msg"]
    chosen = detect(run_module, household, tmux_target="DO-NOT-CREATE-two:0.0")
    assert chosen["pid"] == second


def test_nothing_found_fails_naming_what_was_seen(run_module: RunModule,
                                                  household: Household) -> None:
    household.start_claude(INCIDENT)
    result = detect(run_module, household, tmux_target="DO-NOT-CREATE-elsewhere:0.0")
    assert result["failed"] and "no Claude Code matches" in result["msg"]
    assert "DO-NOT-CREATE-cc:0.0" in result["msg"]  # seen, but not what was asked for
    wrong_base = detect(run_module, household, base="systemd")
    assert wrong_base["failed"] and "'base': 'systemd'" in wrong_base["msg"]


def test_claude_typed_into_a_shell_pane_is_read_from_the_live_process(
        run_module: RunModule, household: Household) -> None:
    household.tmux("new-session", "-d", "-s", "DO-NOT-CREATE-shell", "-c", str(household.workdir),
                   "-e", f"CLAUDE_CONFIG_DIR={household.config_dir}",
                   "-e", f"HOME={household.home}", "-e",
                   f"FAKE_SESSION_ID={household.session_id}", "bash --norc --noprofile")
    household.tmux("send-keys", "-t", "DO-NOT-CREATE-shell:0.0",
                   "claude " + shlex.join(INCIDENT_FLAGS), "Enter")
    deadline = time.monotonic() + 10
    while True:
        found = detect(run_module, household)
        if not found.get("failed") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert found["base"] == "tmux", found
    assert found["start_command"]["value"] == '"bash --norc --noprofile"'
    resume = resume_of(run_module, found)
    assert resume["source"] == "live"
    # The live argv as the kernel wrote it: the stand-in is a script, so its interpreter leads.
    assert resume["resume_command"] == ["/bin/bash", str(household.bin / "claude"), "--resume", R,
                                        *INCIDENT_FLAGS]


@pytest.fixture
def runner(household: Household) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    script = household.root / "pointer_runner.sh"
    script.write_text("#!/bin/bash\nwhile :; do sleep 1000; done\n")
    pointer = household.root / "resume-pointer"
    env = {"PATH": f"{household.bin}:/usr/bin:/bin", "HOME": str(household.home),
           "CLAUDE_CONFIG_DIR": str(household.config_dir),
           "CLAUDE_BIN": str(household.bin / "claude")}
    proc = subprocess.Popen(["bash", str(script), str(pointer), "--allowedTools", "Bash,Read"],
                            cwd=household.workdir, env=env, start_new_session=True)
    try:
        # Right after the fork it is still this interpreter; a household's runner has run long.
        wait_until(lambda: str(script) in cmdline(proc.pid), timeout=10,
                   what=f"the runner {script} to start")
        yield proc, pointer
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_finds_a_pointer_runner(run_module: RunModule, household: Household,
                                runner: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, pointer = runner
    found = run_module("claude_detect", {"name": "batch", "base": "pointer",
                                         "pointer_path": str(pointer)})
    assert found.get("base") == "pointer" and found["pid"] == proc.pid, found
    assert found["pointer_path"] == str(pointer)
    assert found["claude_config_dir"] == str(household.config_dir)
    assert found["claude_cli"] == [str(household.bin / "claude")]
    assert found["start_command"]["kind"] == "pointer_runner_argv"
    resume = resume_of(run_module, found)
    assert resume["resume_command"] == [str(household.bin / "claude"), "-p", "--resume", R,
                                        "--allowedTools", "Bash,Read"]


# -- a systemd unit, in a household container with systemd as PID 1 ---------------------------


def _ansible_in(tmp_path: Path, container: str, module: str, args: dict[str, Any],
                user: str = "root") -> dict[str, Any]:
    """Run MODULE in CONTAINER as USER through Ansible's Docker connection, as a control
    machine does."""
    env = ansible_env(tmp_path)
    env["ANSIBLE_REMOTE_TEMP"] = f"/tmp/.ansible-{user}"  # in the container
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "all", "-i", f"{container},", "-c",
         "community.docker.docker", "-u", user,
         "-e", "ansible_python_interpreter=/usr/bin/python3",
         "-m", f"kael.appliance.{module}", "-a", json.dumps(args)], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=180, check=False)
    head, _, body = proc.stdout.partition(" => ")
    assert body, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(body)
    result["failed"] = "SUCCESS" not in head
    return result


@pytest.fixture
def systemd_household(tmp_path: Path) -> Iterator[SystemdHousehold]:
    if not (docker_reachable() and claude_available()):
        pytest.skip("needs a Docker engine and the pinned Claude Code")
    with SystemdHousehold(tmp_path / "house", Path(os.path.realpath(find_claude_binary()))) as h:
        yield h


@pytest.mark.parametrize("user", [False, True], ids=["system-unit", "user-unit"])
def test_finds_a_systemd_unit_through_its_start_script_on_a_first_start(
        systemd_household: SystemdHousehold, tmp_path: Path, user: bool) -> None:
    """The unit runs claude-start with an empty pointer: a first start gives a new session
    (not `claude --continue`, which exits 1 and restarts the unit in a loop), and the unit is
    found with its pointer taken from the start command. A user unit (lingering, the
    household's user) is found the same way."""
    house = systemd_household
    root = house.root / "stage"
    root.mkdir()
    with StandinAPI() as api:
        claude = make_claude_env(root / "claude", api.url)
        pointer = root / "pointer-dir" / "pointer"
        pointer.parent.mkdir()
        pointer.write_text("")
        if user:
            house.start_user_manager()
            house.root.chmod(0o755)
            for path in [root, *root.rglob("*")]:
                os.chown(path, USER_UID, USER_UID, follow_symlinks=False)
        unit = f"kael-claude-{MARK}-detect.service"
        environment = {**claude.env, "PATH": "/usr/local/bin:/usr/bin:/bin"}
        house.install_claude_unit(unit, workdir=claude.cwd, pointer=pointer,
                                  environment=environment, flags=["--model", "opus"], user=user)
        house.systemctl("start", unit, user=user)
        sessions = claude.config_dir / "sessions"
        deadline = time.monotonic() + 60
        while not (sessions.is_dir() and any(sessions.iterdir())):
            assert time.monotonic() < deadline, house.journal(unit, user=user)
            time.sleep(0.2)
        time.sleep(3)  # a start that fails would have restarted by now
        shown = house.systemctl("show", "-p", "NRestarts", "-p", "ActiveState", unit,
                                user=user).stdout
        assert "NRestarts=0" in shown and "ActiveState=active" in shown, house.journal(unit)
        assert "starting a new session" in house.journal(unit, user=user)

        # Root in a container lacks CAP_SYS_PTRACE, so it cannot read another user's
        # /proc/PID/environ: it says so, and a user unit's household is reached as its user.
        as_user = {"user": USER_NAME} if user else {}
        if user:
            as_root = _ansible_in(tmp_path, house.name, "claude_detect", {"name": "companion"})
            assert as_root["failed"] and "cannot read its /proc entries" in as_root["msg"]
        found = _ansible_in(tmp_path, house.name, "claude_detect", {
            "name": "companion", "base": "systemd", "pointer_path": str(pointer)}, **as_user)
        assert not found["failed"], found["msg"]
        assert found["base"] == "systemd" and found["systemd"]["unit"] == unit
        assert found["systemd"]["bus"] == ("user" if user else "system")
        assert found["pointer_path"] == str(pointer)
        assert found["start_command"]["kind"] == "unit_argv"
        unnamed = _ansible_in(tmp_path, house.name, "claude_detect", {"name": "companion"},
                              **as_user)
        assert unnamed["pointer_path"] == str(pointer)  # read from claude-start's argument
        resume = _ansible_in(tmp_path, house.name, "claude_start_command", {
            "unit_argv": found["start_command"]["value"], "live_pid": found["pid"],
            "fallback_to_live": True}, **as_user)
        assert resume["resume_command"] == ["/usr/local/bin/claude", "--resume", R, "--model",
                                            "opus"]
        house.systemctl("stop", unit, user=user, check=False)
