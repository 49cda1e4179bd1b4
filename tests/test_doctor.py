"""Doctor: a sound setup passes; each broken part fails its own check with a fix; nothing is
written. The "deaf process" check compares against a real process in a real (private) tmux."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.daemon import worker_lock
from kael_thread_rebuild.doctor import (
    CHECKS,
    Check,
    DoctorReport,
    claude_arguments,
    flag_groups,
    missing_flags,
    run_doctor,
)
from kael_thread_rebuild.interfaces import doctor_command
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import utcnow
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import encode_project_dir
from kael_thread_rebuild.switching import registry
from tests.builder import SESSION, TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.guard import install_guard
from tests.switching.sandbox import PrivateTmux, cmdline, wait_until

OTHER = "5e55a1d0-0000-4000-8000-0000000000ff"
CHANNELS = ["--channels", "plugin:telegram@claude-plugins-official",
            "--dangerously-load-development-channels", "server:companion"]
LIVE_FLAGS = ["--continue", "--model", "opus", *CHANNELS, "--verbose"]
RESUME = ["claude", "--resume", "{session_id}", "--model", "opus", *CHANNELS, "--verbose"]
HOOK = {"hooks": {"Stop": [{"hooks": [
    {"type": "command", "command": "/bin/true"},
    {"type": "command", "command": "kael-thread-rebuild --config /c.toml hook-stop",
     "timeout": 10}]}]}}
MCP = {"kael-thread-rebuild": {"type": "stdio", "command": "/venv/bin/kael-thread-rebuild-mcp",
                               "args": ["--config", "/c.toml"], "env": {}}}


@pytest.fixture(autouse=True)
def _guard(monkeypatch: pytest.MonkeyPatch) -> None:
    install_guard(monkeypatch)


def by_name(report: DoctorReport) -> dict[str, Check]:
    return {check.name: check for check in report.checks}


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@dataclass
class Layout:
    """A Claude Code installation on disk: workdir, config dir, project dir with a transcript."""

    workdir: Path
    config_dir: Path
    project_dir: Path
    transcript: Path

    def settings(self) -> dict[str, Any]:
        return dict(project_dir=str(self.project_dir), claude_workdir=str(self.workdir),
                    claude_config_dir=str(self.config_dir))


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    workdir = tmp_path / "work"
    workdir.mkdir()
    config_dir = tmp_path / "claude-config"
    project_dir = config_dir / "projects" / encode_project_dir(os.path.realpath(workdir))
    project_dir.mkdir(parents=True)
    builder = TranscriptBuilder(cwd=str(workdir))
    builder.user("Hello there.")
    builder.say("Hello!")
    transcript = builder.write(project_dir / f"{SESSION}.jsonl")
    write_json(config_dir / "settings.json", {"permissions": {"allow": []}, **HOOK})
    write_json(config_dir / ".claude.json", {"numStartups": 3, "mcpServers": MCP})
    return Layout(workdir, config_dir, project_dir, transcript)


@dataclass
class Live:
    tmux: PrivateTmux
    target: str
    pid: int


@pytest.fixture
def live(tmp_path: Path, layout: Layout) -> Iterator[Live]:
    """A fake `claude` (found on PATH) sleeping with LIVE_FLAGS in a private tmux pane, and the
    session registry entry Claude Code would write for it."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    with PrivateTmux(home) as tmux:
        tmux.env["PATH"] = f"{bin_dir}{os.pathsep}{tmux.env['PATH']}"
        target = tmux.new_session(["claude", *LIVE_FLAGS], cwd=layout.workdir)
        pane_pid = int(tmux.display(target, "#{pane_pid}"))

        def claude_pid() -> int | None:
            return next((pid for pid in registry.process_tree(pane_pid)
                         if str(fake) in cmdline(pid)), None)

        pid = wait_until(claude_pid, what="the fake claude to start")
        write_registry(layout, pid, SESSION)
        yield Live(tmux, target, pid)


def write_registry(layout: Layout, pid: int, session_id: str) -> None:
    write_json(layout.config_dir / "sessions" / f"{pid}.json",
               {"pid": pid, "sessionId": session_id, "cwd": str(layout.workdir),
                "procStart": registry.proc_start(pid), "pidDomain": registry.pid_domain(),
                "status": "idle", "kind": "interactive", "startedAt": 1})


@pytest.fixture
def sound(make_config: ConfigFactory, layout: Layout, live: Live) -> Config:
    return make_config(**layout.settings(), tmux_socket=live.tmux.socket,
                       tmux_target=live.target, resume_command=RESUME)


# -- a sound setup -------------------------------------------------------------------------------


def test_sound_setup_passes_every_check(sound: Config, live: Live) -> None:
    report = run_doctor(sound)
    checks = by_name(report)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert list(checks) == [fn.__name__.removeprefix("check_") for fn in CHECKS]
    assert not [c.name for c in report.checks if c.skipped]
    assert f"pane_pid={int(live.tmux.display(live.target, '#{pane_pid}'))}" in \
        checks["target"].detail
    assert SESSION in checks["session"].detail
    assert f"pid {live.pid}" in checks["resume_command"].detail
    assert "--dangerously-load-development-channels" in checks["resume_command"].detail


def test_deaf_resume_command_names_the_missing_channel_flag(
        make_config: ConfigFactory, layout: Layout, live: Live) -> None:
    deaf = [word for word in RESUME
            if word not in ("--dangerously-load-development-channels", "server:companion")]
    config = make_config(**layout.settings(), tmux_socket=live.tmux.socket,
                         tmux_target=live.target, resume_command=deaf)
    report = run_doctor(config)
    check = by_name(report)["resume_command"]
    assert not report.ok and not check.ok
    assert "--dangerously-load-development-channels server:companion" in check.detail
    assert "--channels plugin" not in check.detail
    suggested = json.loads(check.fix.removeprefix("resume_command = "))
    assert suggested[-2:] == ["--dangerously-load-development-channels", "server:companion"]
    assert [c.name for c in report.checks if not c.ok] == ["resume_command"]


def test_live_process_of_another_session(layout: Layout, live: Live, sound: Config) -> None:
    write_registry(layout, live.pid, OTHER)
    check = by_name(run_doctor(sound))["session"]
    assert not check.ok and OTHER in check.detail and "no transcript" in check.detail

    newer = layout.project_dir / f"{OTHER}.jsonl"
    newer.write_bytes(layout.transcript.read_bytes())
    write_registry(layout, live.pid, SESSION)
    os.utime(newer, (layout.transcript.stat().st_mtime + 10,) * 2)
    check = by_name(run_doctor(sound))["session"]
    assert not check.ok and f"newest transcript is {OTHER}" in check.detail


def test_doctor_writes_nothing(sound: Config, tmp_path: Path) -> None:
    def tree() -> dict[str, tuple[int, int, int]]:
        return {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
                for p in sorted(tmp_path.rglob("*"))}

    before = tree()
    report = run_doctor(sound)
    assert by_name(report)["state_dir"].ok and not sound.state_dir.exists()
    assert by_name(report)["operations"].detail == "no operation store yet"
    assert tree() == before


# -- broken setups, one at a time ----------------------------------------------------------------


def test_missing_project_dir(make_config: ConfigFactory, tmp_path: Path) -> None:
    report = run_doctor(make_config(project_dir=str(tmp_path / "nowhere")))
    check = by_name(report)["project_dir"]
    assert not report.ok and not check.ok and "does not exist" in check.detail and check.fix


def test_project_dir_without_transcripts(make_config: ConfigFactory) -> None:
    check = by_name(run_doctor(make_config()))["project_dir"]
    assert not check.ok and "no session transcript" in check.detail


def test_wrong_workdir_encoding(make_config: ConfigFactory, project_dir: Path,
                                tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    check = by_name(run_doctor(make_config(claude_workdir=str(workdir))))["claude_workdir"]
    expected = encode_project_dir(os.path.realpath(workdir))
    assert not check.ok
    assert expected in check.detail and project_dir.name in check.detail
    assert str(project_dir.parent / expected) in check.fix


def test_unset_workdir_fails_for_tmux_only(make_config: ConfigFactory, tmp_path: Path) -> None:
    assert not by_name(run_doctor(make_config()))["claude_workdir"].ok
    pointer = tmp_path / "pointer"
    pointer.write_text(SESSION + "\n")
    check = by_name(run_doctor(make_config(activation="pointer",
                                           resume_pointer_path=str(pointer))))["claude_workdir"]
    assert check.ok and check.skipped


def test_stop_hook_missing(make_config: ConfigFactory, layout: Layout) -> None:
    config = make_config(**layout.settings())
    settings = layout.config_dir / "settings.json"
    write_json(settings, {"permissions": {"allow": []},
                          "hooks": {"Stop": [{"hooks": [{"type": "command",
                                                         "command": "/bin/true"}]}]}})
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and str(settings) in check.detail and "hook-stop" in check.fix

    settings.write_text("{not json")
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and "not valid JSON" in check.detail

    write_json(layout.workdir / ".claude" / "settings.local.json", HOOK)
    check = by_name(run_doctor(config))["stop_hook"]
    assert check.ok and "settings.local.json" in check.detail


def test_mcp_server_not_registered(make_config: ConfigFactory, layout: Layout) -> None:
    config = make_config(**layout.settings())
    state = layout.config_dir / ".claude.json"
    write_json(state, {"mcpServers": {"companion": {"command": "node", "args": ["x.js"]}}})
    check = by_name(run_doctor(config))["mcp_server"]
    assert not check.ok and "claude mcp add --scope user kael-thread-rebuild" in check.fix

    write_json(state, {"mcpServers": {"rebuild": {"command": "docker", "args": [
        "run", "-i", "--rm", "img", "kael-thread-rebuild-mcp"]}}})
    assert by_name(run_doctor(config))["mcp_server"].ok

    write_json(state, {"projects": {os.path.realpath(layout.workdir): {"mcpServers": MCP}}})
    check = by_name(run_doctor(config))["mcp_server"]
    assert check.ok and "local scope" in check.detail


def test_stuck_operation(make_config: ConfigFactory, layout: Layout) -> None:
    config = make_config(**layout.settings())
    assert by_name(run_doctor(config))["operations"].ok
    op = service.request(config, "tidy up", "REBUILD")
    assert by_name(run_doctor(config))["operations"].ok
    later = utcnow() + timedelta(hours=3)
    daemon = worker_lock(config)  # a running daemon drives operations: doctor only reports
    try:
        check = by_name(run_doctor(config, now=later))["operations"]
        assert not check.ok
        assert f"{op.operation_id} has been pending for 3 h" in check.detail
        assert f"--operation {op.operation_id} --confirm CANCEL" in check.fix

        store = OperationStore(config.state_dir)
        store.transition(op.operation_id, service.S.scheduled, "test")
        check = by_name(run_doctor(config, now=later))["operations"]
        assert not check.ok and "serve" in check.fix
    finally:
        daemon.release()


def test_doctor_recovers_stuck_operations_when_no_daemon_runs(make_config: ConfigFactory,
                                                              layout: Layout) -> None:
    config = make_config(**layout.settings())
    op = service.request(config, "tidy up", "REBUILD")
    OperationStore(config.state_dir).transition(op.operation_id, service.S.scheduled, "test")
    check = by_name(run_doctor(config, now=utcnow() + timedelta(hours=3)))["operations"]
    assert check.ok and f"recovered {op.operation_id} -> failed" in check.detail
    settled = service.status(config, op.operation_id)
    assert settled is not None and settled.status is service.S.failed
    assert settled.error.startswith("interrupted before switching")


def test_state_dir_mode(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    OperationStore(config.state_dir)
    assert by_name(run_doctor(config))["state_dir"].ok
    config.state_dir.chmod(0o755)
    check = by_name(run_doctor(config))["state_dir"]
    assert not check.ok and "mode 0755, not 0700" in check.detail
    assert stat.S_IMODE(config.state_dir.stat().st_mode) == 0o755


def test_unreachable_tmux_target(make_config: ConfigFactory, layout: Layout) -> None:
    checks = by_name(run_doctor(make_config(**layout.settings(), resume_command=RESUME)))
    assert not checks["target"].ok and "DO-NOT-CREATE-test:0.0" in checks["target"].fix
    assert checks["session"].skipped and checks["resume_command"].skipped


def test_pointer_base(make_config: ConfigFactory, layout: Layout, tmp_path: Path) -> None:
    pointer = tmp_path / "pointer"
    pointer.write_text(SESSION + "\n")
    config = make_config(**layout.settings(), activation="pointer",
                         resume_pointer_path=str(pointer))
    report = run_doctor(config)
    checks = by_name(report)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert checks["target"].detail.startswith("pointer sha256=")
    assert checks["session"].ok and not checks["session"].skipped
    assert checks["resume_command"].skipped

    pointer.write_text("not a session\n")
    assert not by_name(run_doctor(config))["target"].ok


# -- the command line parsing behind the deaf-process check --------------------------------------


@pytest.mark.parametrize("argv, expected", [
    (["claude", "--resume", "x", "--model", "opus"], [("--model", "opus")]),
    (["claude", "-c", "--channels", "a", "b", "--verbose"], [("--channels", "a", "b"),
                                                            ("--verbose",)]),
    (["claude", "-p", "hello there", "--model=opus"], [("--print",), ("--model", "opus")]),
    (["claude", "--session-id", "u", "-r", "--fork-session", "--", "-x"], []),
    (["claude", "--verbose", "initial prompt"], [("--verbose",)]),
    (["claude", "-n", "cc", "--allowedTools", "Bash"], [("--name", "cc"),
                                                       ("--allowed-tools", "Bash")]),
])
def test_flag_groups(argv: list[str], expected: list[tuple[str, ...]]) -> None:
    assert flag_groups(claude_arguments(argv) or []) == expected


def test_claude_arguments_finds_the_program() -> None:
    assert claude_arguments(["/usr/bin/python3", "/x/bin/claude", "-c"]) == ["-c"]
    assert claude_arguments(["env", "A=1", "claude.exe", "--v"]) == ["--v"]
    assert claude_arguments(["node", "/n/@anthropic-ai/claude-code/cli.js", "-c"]) == ["-c"]
    assert claude_arguments(["bash", "-l"]) is None


def test_missing_flags_is_a_multiset() -> None:
    live = ["claude", "--channels", "a", "--channels", "b", "--continue"]
    assert missing_flags(live, ["claude", "--resume", "{session_id}", "--channels", "a"]) == [
        ("--channels", "b")]
    assert missing_flags(live, ["env", "X=1", "claude", "--channels=b", "-r", "{session_id}",
                                "--channels", "a"]) == []


# -- the doctor command --------------------------------------------------------------------------


def run_command(config: Config, *flags: str) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    parser = argparse.ArgumentParser()
    doctor_command.register(parser.add_subparsers(dest="command"), common)
    args = parser.parse_args(["doctor", *flags])
    code: int = args.handler(config, args)
    return code


def test_doctor_command_lines_and_exit_code(make_config: ConfigFactory, layout: Layout,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config(**layout.settings())
    assert run_command(config) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(CHECKS)
    assert lines[0].startswith("ok    project_dir ")
    target = next(line for line in lines if " target " in line)
    assert target.startswith("FAIL  target ") and " — fix: run Claude Code in tmux pane" in target
    assert any(line.startswith("skip  session ") for line in lines)

    assert run_command(config, "--json") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and len(data["checks"]) == len(CHECKS)


def test_doctor_command_exit_0_when_sound(sound: Config,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command(sound) == 0
    assert all(line.startswith("ok  ") for line in capsys.readouterr().out.splitlines())
