"""The tmux base against a real tmux server on a private socket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from kael_thread_rebuild.errors import Refused
from kael_thread_rebuild.switching.tmux import (
    PaneGone,
    TargetAmbiguous,
    TmuxBase,
    TmuxUnreachable,
    tmux_command,
)
from tests.guard import MARK, TEST_SOCKET_PREFIX, tmux_socket_dir
from tests.switching.sandbox import (
    SLEEPER,
    PrivateTmux,
    cmdline,
    environ,
    safe_config,
    tmux_config,
    wait_until,
)

AWKWARD_WORDS = [
    "a b", "it's", 'say "hi"', "ünïcødé ✓ 日本語", "$HOME", "`id`", "*", "back\\slash",
    "double\\\\back", "", "  ", "line\nbreak", "\ttab", "x; touch PWNED", "-flag=1",
]


def _pid(base: TmuxBase) -> int:
    return int(base.identity().token["pane_pid"])


def _running(pid: int, argv: list[str]) -> bool:
    try:
        return cmdline(pid) == argv
    except OSError:
        return False


def test_identity_is_pane_id_and_pane_pid(tmux: PrivateTmux, tmp_path: Path,
                                          workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    base = TmuxBase(tmux_config(tmux, target, tmp_path))

    identity = base.identity()

    assert identity.base == "tmux"
    assert identity.token == {"pane_id": tmux.display(target, "#{pane_id}"),
                              "pane_pid": tmux.display(target, "#{pane_pid}")}
    assert cmdline(int(identity.token["pane_pid"])) == SLEEPER
    assert identity.running_session_id is None
    assert base.alive()
    assert base.identity() == identity


def test_respawn_keeps_pane_id_changes_pid_and_passes_every_word_intact(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=tmp_path)
    workdir = workdir / "proj #1 #{pane_id} ünï"
    workdir.mkdir()
    config = tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                         resume_command=[*SLEEPER, "--resume", "{session_id}", *AWKWARD_WORDS])
    base = TmuxBase(config)
    before = base.identity()
    session_id = str(uuid.uuid4())

    argv = base.switch_to(session_id)

    assert argv == [*SLEEPER, "--resume", session_id, *AWKWARD_WORDS]
    after = base.identity()
    assert after.token["pane_id"] == before.token["pane_id"]
    assert after.token["pane_pid"] != before.token["pane_pid"]
    pid = int(after.token["pane_pid"])
    # `exec`: once the shell has replaced itself, the pane's process is the command itself.
    wait_until(lambda: _running(pid, argv), what="the respawned command")
    assert os.readlink(f"/proc/{pid}/cwd") == str(workdir)
    assert not (workdir / "PWNED").exists()
    assert base.alive()


def test_respawn_inherits_global_and_session_environment_not_pane_only_variables(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    config_dir = tmp_path / "claude config"
    target = tmux.new_session(SLEEPER, cwd=workdir,
                              env={"CLAUDE_CONFIG_DIR": str(config_dir), "FROM_SESSION": "k v"})
    session = target.partition(":")[0]
    pane_id = tmux.run("split-window", "-t", target, "-P", "-F", "#{pane_id}",
                       "-e", "ONLY_THIS_PANE=1", *SLEEPER).stdout.strip()
    split_target = f"{session}:0.{tmux.display(pane_id, '#{pane_index}')}"
    base = TmuxBase(tmux_config(tmux, split_target, tmp_path, claude_workdir=workdir,
                                resume_command=[*SLEEPER, "{session_id}"]))
    assert environ(_pid(base))["ONLY_THIS_PANE"] == "1"

    argv = base.switch_to(str(uuid.uuid4()))
    pid = _pid(base)
    wait_until(lambda: _running(pid, argv), what="the respawned command")

    env = environ(pid)
    assert env["CLAUDE_CONFIG_DIR"] == str(config_dir)
    assert env["FROM_SESSION"] == "k v"
    assert env["HOME"] == tmux.env["HOME"]
    assert env["TMUX_PANE"] == pane_id
    assert env["TMUX"].split(",")[0].endswith(tmux.socket)
    assert "ONLY_THIS_PANE" not in env


def test_dead_pane_is_not_alive_and_can_be_respawned(tmux: PrivateTmux, tmp_path: Path,
                                                      workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    base = TmuxBase(tmux_config(tmux, target, tmp_path,
                                resume_command=[*SLEEPER, "{session_id}"]))
    os.kill(_pid(base), signal.SIGKILL)
    wait_until(lambda: tmux.display(target, "#{pane_dead}") == "1", what="the pane to die")

    assert not base.alive()
    assert base.running_session() is None
    assert base.identity().running_session_id is None

    base.switch_to(str(uuid.uuid4()))
    assert base.alive()


@pytest.mark.parametrize("target", ["{session}:9.0", "{session}:0.7", MARK + "-absent:0.0",
                                    "{prefix}:0.0", "{session}:0*.0",
                                    "{session}:0.{{last}}"])
def test_missing_pane_is_a_one_line_error(tmux: PrivateTmux, tmp_path: Path, workdir: Path,
                                          target: str) -> None:
    session = tmux.new_session(SLEEPER, cwd=workdir).partition(":")[0]
    # tmux itself would resolve a prefix, a pattern or a missing window to some existing pane.
    target = target.format(session=session, prefix=session[:-2])
    base = TmuxBase(tmux_config(tmux, target, tmp_path))

    for call in (base.identity, base.running_session, lambda: base.switch_to(str(uuid.uuid4()))):
        with pytest.raises(PaneGone) as caught:
            call()
        assert str(caught.value) == f"tmux target {target!r} not found: no such pane on the server"
    assert not base.alive()


def test_no_server_is_a_one_line_error_and_none_is_started(tmp_path: Path) -> None:
    name = f"{TEST_SOCKET_PREFIX}{MARK}-{uuid.uuid4().hex[:10]}"
    path_socket = str(tmp_path / "no-such.sock")
    for socket in (name, path_socket):
        base = TmuxBase(safe_config(tmp_path, tmux_socket=socket,
                                    tmux_target=f"{MARK}-x:0.0"))
        for call in (base.identity, lambda b=base: b.switch_to(str(uuid.uuid4()))):
            with pytest.raises(TmuxUnreachable) as caught:
                call()
            assert "\n" not in str(caught.value)
        assert not base.alive()
    assert not (tmux_socket_dir() / name).exists()
    assert not Path(path_socket).exists()


def test_socket_path_is_passed_with_dash_s(tmp_path: Path, workdir: Path) -> None:
    socket = tmp_path / "tmux.sock"
    session = f"{MARK}-by-path"
    subprocess.run(["tmux", "-S", str(socket), "-f", "/dev/null", "new-session", "-d", "-s",
                    session, *SLEEPER], check=True, env={"PATH": os.environ["PATH"]})
    try:
        base = TmuxBase(safe_config(tmp_path, tmux_socket=str(socket),
                                    tmux_target=f"{session}:0.0"))
        assert base.alive()
        assert cmdline(_pid(base)) == SLEEPER
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], check=False)


def test_tmux_command_takes_the_socket_from_the_config_only(tmp_path: Path) -> None:
    assert tmux_command(safe_config(tmp_path, tmux_socket="kael-test-DO-NOT-CREATE-a")) == [
        "tmux", "-L", "kael-test-DO-NOT-CREATE-a"]
    assert tmux_command(safe_config(tmp_path, tmux_socket=str(tmp_path / "s"))) == [
        "tmux", "-S", str(tmp_path / "s")]


def test_targets_that_do_not_name_one_pane_are_refused(tmux: PrivateTmux, tmp_path: Path,
                                                       workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    session = target.partition(":")[0]
    tmux.run("split-window", "-t", target, *SLEEPER)
    for _ in range(2):
        tmux.run("new-window", "-t", session, "-n", "twin", *SLEEPER)
    pane_id = tmux.display(target, "#{pane_id}")
    window_name = tmux.display(target, "#{window_name}")

    for vague in (session, f"{session}:0", f"{session}:twin.0"):
        with pytest.raises(TargetAmbiguous) as caught:
            TmuxBase(tmux_config(tmux, vague, tmp_path)).identity()
        assert "\n" not in str(caught.value)
    for exact in (target, f"={session}:0.0", f"{session}:{window_name}.0", f"{session}:@0.%0"):
        assert TmuxBase(tmux_config(tmux, exact, tmp_path)).identity().token["pane_id"] == pane_id


def test_switch_needs_claude_workdir(tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    base = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=None))
    pid = _pid(base)
    with pytest.raises(Refused, match="claude_workdir"):
        base.switch_to(str(uuid.uuid4()))
    assert _pid(base) == pid


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexec sleep 600\n")
    path.chmod(0o755)
    return path


def test_the_respawned_pane_gets_the_tmux_path_not_the_switching_clients(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # tmux hands a respawned pane the PATH of the client that asks, when that client is attached
    # to no session: from the appliance container, the container's PATH.
    target = tmux.new_session(SLEEPER, cwd=workdir)
    session_path = f"{tmux.env['PATH']}:{tmp_path / 'only-in-tmux'}"
    tmux.run("set-environment", "-g", "PATH", session_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'only-in-the-client'}:{os.environ['PATH']}")
    base = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                                resume_command=[*SLEEPER, "{session_id}"]))

    argv = base.switch_to(str(uuid.uuid4()))
    pid = _pid(base)
    wait_until(lambda: _running(pid, argv), what="the respawned command")

    assert environ(pid)["PATH"] == session_path
    tmux.run("set-environment", "-t", target.partition(":")[0], "PATH", "/usr/bin:/bin")
    assert base.pane_path(base.pane()) == "/usr/bin:/bin"  # the session's own wins


def test_the_start_check_looks_where_the_pane_will_run_the_program(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    client_only = _executable(tmp_path / "client-bin" / "kael-drill-claude")
    in_tmux = _executable(tmp_path / "tmux-bin" / "kael-drill-claude-too")
    (tmp_path / "tmux-bin" / "not-executable").write_text("")
    tmux.run("set-environment", "-g", "PATH", f"{tmux.env['PATH']}:{in_tmux.parent}")
    # This process finds the first program; a check made here would pass.
    monkeypatch.setenv("PATH", f"{client_only.parent}:{os.environ['PATH']}")
    pane_pid = tmux.display(target, "#{pane_pid}")

    def problem(program: str, work: Path = workdir) -> str:
        config = tmux_config(tmux, target, tmp_path, claude_workdir=work,
                             resume_command=[program, "--resume", "{session_id}"])
        return TmuxBase(config).start_problem(str(uuid.uuid4()))

    assert problem(in_tmux.name) == ""
    assert problem(str(in_tmux)) == ""
    assert problem(client_only.name) == (
        f"the program {client_only.name!r} of resume_command is not found on the tmux server's "
        f"host on the PATH a respawned pane gets ({tmux.env['PATH']}:{in_tmux.parent}, the tmux "
        "environment's)")
    missing = str(tmp_path / "no such dir" / "claude")
    assert problem(missing) == (f"the program {missing!r} of resume_command is not an "
                                "executable file on the tmux server's host")
    assert "not an executable file" in problem(str(tmp_path / "tmux-bin" / "not-executable"))
    assert problem(in_tmux.name, tmp_path / "gone #1") == (
        f"claude_workdir {tmp_path / 'gone #1'} is not a directory on the tmux server's host")
    # The check runs beside the pane: the pane's process and screen are left alone.
    assert tmux.display(target, "#{pane_pid} #{pane_in_mode}") == f"{pane_pid} 0"


def test_a_command_that_exits_at_once_leaves_the_pane_and_its_server(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    # A household's pane: the only pane of the only session, remain-on-exit off.
    target = tmux.new_session(SLEEPER, cwd=workdir, remain_on_exit=False)
    pane_id = tmux.display(target, "#{pane_id}")
    broken = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                                  resume_command=[str(tmp_path / "no-such-claude"),
                                                  "{session_id}"]))
    broken.switch_to(str(uuid.uuid4()))

    wait_until(lambda: tmux.display(pane_id, "#{pane_dead}") == "1", what="the pane to die")
    assert not broken.alive()
    working = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                                   resume_command=[*SLEEPER, "{session_id}"]))
    argv = working.switch_to(str(uuid.uuid4()))
    assert working.pane().pane_id == pane_id
    wait_until(lambda: _running(_pid(working), argv), what="the command in the same pane")
    working.switch_done()
    assert tmux.run("show-options", "-p", "-q", "-v", "-t", pane_id,
                    "remain-on-exit").stdout.strip() == ""
    broken.switch_done()  # nothing is left to undo
    assert tmux.display(pane_id, "#{remain-on-exit}") == "off"


def test_a_pane_setting_of_its_own_comes_back_after_the_switch(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir, remain_on_exit=False)
    tmux.run("set-option", "-p", "-t", target, "remain-on-exit", "failed")
    base = TmuxBase(tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                                resume_command=[*SLEEPER, "{session_id}"]))
    base.switch_to(str(uuid.uuid4()))
    assert tmux.display(target, "#{remain-on-exit}") == "on"
    base.switch_done()
    assert tmux.display(target, "#{remain-on-exit}") == "failed"


def test_from_another_pid_namespace_the_panes_foreground_program_is_in_the_identity(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    # As the appliance container sees a household: Claude Code's registry entry names the pane,
    # its pid is in another pid namespace, so /proc cannot tell a stale entry (a Claude Code
    # killed with SIGKILL) from a live one.
    target = tmux.new_session(["bash", "--norc", "--noprofile", "-i"], cwd=workdir)
    config = tmux_config(tmux, target, tmp_path, claude_workdir=workdir)
    assert config.claude_config_dir is not None
    pane_id, window_id = tmux.display(target, "#{pane_id} #{window_id}").split()
    session_id = str(uuid.uuid4())
    entry = {"pid": 4321, "sessionId": session_id, "procStart": "77", "startedAt": 1,
             "pidDomain": "linux:0123456789abcdef:pid:[4026531836]",
             "tmux": f"{target.partition(':')[0]}:{window_id}.{pane_id}"}
    sessions = config.claude_config_dir / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "4321.json").write_text(json.dumps(entry))
    base = TmuxBase(config)
    before = base.identity()
    assert before.running_session_id == session_id
    assert before.token == {"pane_id": pane_id, "pane_pid": tmux.display(target, "#{pane_pid}"),
                            "claude_pid": "4321", "claude_start": "77", "pane_command": "bash"}

    tmux.run("send-keys", "-t", target, "sleep 1000", "Enter")
    wait_until(lambda: tmux.display(target, "#{pane_current_command}") == "sleep",
               what="another program in the pane")

    after = base.identity()
    assert after.running_session_id == session_id  # the stale entry still names the pane
    assert after.token == {**before.token, "pane_command": "sleep"}
