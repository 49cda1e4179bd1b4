"""Doctor: a sound setup passes; each broken part fails its own check with a fix; nothing is
written. The "deaf process" check compares against a real process in a real (private) tmux. The
appliance's checks get the host's facts as `image/run-doctor.sh` and the installer pass them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

import kael_thread_rebuild.doctor.facts as doctor_facts
from kael_thread_rebuild import __version__
from kael_thread_rebuild.claude_code import command_line, registry
from kael_thread_rebuild.claude_code.command_line import (
    claude_arguments,
    flag_groups,
    missing_flags,
)
from kael_thread_rebuild.claude_code.project_dir import encode_project_dir
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.daemon import worker_lock
from kael_thread_rebuild.doctor import hooks, resume
from kael_thread_rebuild.doctor.facts import UNMOUNTED_ENV
from kael_thread_rebuild.doctor.host import VERSION_LABEL
from kael_thread_rebuild.doctor.host_facts import HOST_FACTS_ENV
from kael_thread_rebuild.doctor.mcp import global_state_files
from kael_thread_rebuild.doctor.model import Check, DoctorReport
from kael_thread_rebuild.doctor.reading import read_cmdline
from kael_thread_rebuild.doctor.resume import resume_claude_args
from kael_thread_rebuild.doctor.runner import CHECKS, run_doctor
from kael_thread_rebuild.interfaces import cli
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import (
    Operation,
    OperationStatus,
    Transition,
    new_operation_id,
    utcnow,
)
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import MANIFEST_SUFFIX
from kael_thread_rebuild.state_layout import CONFIG_ENV
from kael_thread_rebuild.switching.base import Identity
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.builder import SESSION, TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.drill import procs
from tests.guard import install_guard
from tests.switching.sandbox import PrivateTmux, cmdline, wait_until
from tests.test_mcp_server import call, with_session, write_config

S = OperationStatus
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
IMAGE_ID = "sha256:" + "a" * 64


def host_facts(**changes: Any) -> dict[str, Any]:
    """What image/run-doctor.sh reports for a sound appliance: the daemon runs the installed
    image, the engine in it says the same version, no MCP container is left over, the Claude
    user has no Docker and its two wrapper lines."""
    labels = {VERSION_LABEL: __version__, "org.opencontainers.image.revision": "r1"}
    facts: dict[str, Any] = {
        "collected_by": "test",
        "installed_image": {"ref": "kael-thread-rebuild:latest", "id": IMAGE_ID,
                            "labels": labels},
        "daemons": [{"id": "d" * 64, "name": "/kael-thread-rebuild-default", "state": "running",
                     "image_id": IMAGE_ID, "image_labels": labels,
                     "engine": f"kael-thread-rebuild {__version__}\n"}],
        "mcp_containers": [],
        "claude_access": {"user": "claude", "uid": 1000, "groups": ["claude"],
                          "socket": "unix:///var/run/docker.sock", "socket_reachable": False,
                          "socket_detail": "permission denied",
                          "wrapper": "/usr/local/lib/kael-thread-rebuild/kael-run",
                          "allowed": ["mcp default", "hook default"]},
    }
    facts.update(changes)
    return facts


def on_host(**changes: Any) -> dict[str, str]:
    """An environment carrying the host's facts, as the appliance's doctor container gets."""
    return {HOST_FACTS_ENV: json.dumps(host_facts(**changes))}


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
    """A fake `claude` (found on PATH) sleeping with LIVE_FLAGS in a private tmux pane and
    running its registered MCP server as its child (as Claude Code does from its start), and the
    session registry entry Claude Code would write for it."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "kael-thread-rebuild-mcp"  # lives as long as its parent
    server.write_text(f"#!{sys.executable}\nimport os, time\nparent = os.getppid()\n"
                      "while os.getppid() == parent:\n    time.sleep(0.2)\n")
    server.chmod(0o755)
    entry = {**MCP["kael-thread-rebuild"], "command": str(server)}
    write_json(layout.config_dir / ".claude.json",
               {"numStartups": 3, "mcpServers": {"kael-thread-rebuild": entry}})
    fake = bin_dir / "claude"
    fake.write_text(f"#!{sys.executable}\nimport subprocess, time\n"
                    f"subprocess.Popen({[str(server), *entry['args']]!r})\ntime.sleep(600)\n")
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
        wait_until(lambda: any(str(server) in (read_cmdline(child) or [])
                               for child in registry.process_tree(pid)[1:]),
                   what="the fake claude to start its MCP server")
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
    report = run_doctor(sound, environ=on_host())
    checks = by_name(report)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert list(checks) == [fn.__name__.removeprefix("check_") for fn in CHECKS]
    assert not [c.name for c in report.checks if c.skipped]
    assert f"pane_pid={int(live.tmux.display(live.target, '#{pane_pid}'))}" in \
        checks["target"].detail
    assert SESSION in checks["session"].detail
    assert f"pid {live.pid}" in checks["resume_command"].detail
    assert "--dangerously-load-development-channels" in checks["resume_command"].detail
    assert checks["mcp_containers"].detail.startswith("0 running for 1 live Claude Code")
    assert checks["mcp_loaded"].detail.startswith(f"the live Claude Code (pid {live.pid}) runs")
    assert checks["versions"].detail.startswith(
        f"the daemon kael-thread-rebuild-default runs kael-thread-rebuild:latest {__version__}")


def test_without_the_hosts_facts_the_appliance_checks_are_skipped(sound: Config) -> None:
    checks = by_name(run_doctor(sound, environ={}))
    for name in ("mcp_containers", "versions"):
        assert checks[name].ok and checks[name].skipped
        assert "image/run-doctor.sh" in checks[name].detail
    broken = by_name(run_doctor(sound, environ={HOST_FACTS_ENV: '{"daemons": 3}'}))
    assert not broken["versions"].ok and "daemons" in broken["versions"].detail


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


@pytest.mark.parametrize("wrapper", [
    ["bash", "-lc", "cd /tmp && exec claude --resume {session_id} --model opus " +
     shlex.join(CHANNELS) + " --verbose"],
    ["script", "-qfc", "claude --resume {session_id} --model opus " + shlex.join(CHANNELS) +
     " --verbose", "/dev/null"],
])
def test_resume_command_through_a_wrapper(make_config: ConfigFactory, layout: Layout, live: Live,
                                          wrapper: list[str]) -> None:
    def check(resume_command: list[str]) -> Check:
        config = make_config(**layout.settings(), tmux_socket=live.tmux.socket,
                             tmux_target=live.target, resume_command=resume_command)
        return by_name(run_doctor(config))["resume_command"]

    kept = check(wrapper)
    assert kept.ok and f"through {wrapper[0]} " in kept.detail
    deaf = check([word.replace(" server:companion", "").replace(
        " --dangerously-load-development-channels", "") for word in wrapper])
    assert not deaf.ok
    assert "--dangerously-load-development-channels server:companion" in deaf.detail
    assert deaf.fix.startswith("add --dangerously-load-development-channels server:companion to "
                               "the Claude Code command inside")
    unknowable = check(["bash", "-lc", "claude --resume {session_id} $CLAUDE_FLAGS"])
    assert not unknowable.ok and "may expand to several words" in unknowable.detail


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


def stop_hooks(*commands: str) -> dict[str, Any]:
    return {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": c, "timeout": 10}
                                          for c in commands]}]}}


def test_stop_hook_accepts_the_appliance_wrapper_of_this_instance(
        make_config: ConfigFactory, layout: Layout, tmp_path: Path) -> None:
    config = make_config(**layout.settings())
    settings = layout.config_dir / "settings.json"
    ours = (f"/usr/local/bin/kael-hook --container kael-thread-rebuild-default --config /c.toml "
            f"--state-dir {config.state_dir}")
    write_json(settings, stop_hooks("/bin/true", ours))
    check = by_name(run_doctor(config))["stop_hook"]
    assert check.ok and ours in check.detail

    theirs = ours.replace(str(config.state_dir), str(tmp_path / "other-state"))
    write_json(settings, stop_hooks(theirs))
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and "only hooks of another instance" in check.detail
    assert "--state-dir" in check.detail and "kael-hook --container" in check.fix


def test_stop_hook_of_another_config_is_not_this_instances(
        make_config: ConfigFactory, layout: Layout, tmp_path: Path) -> None:
    config = make_config(**layout.settings())
    other = tmp_path / "other.toml"
    other.write_text(f'instance = "other"\nproject_dir = "{layout.project_dir}"\n'
                     f'state_dir = "{tmp_path / "other-state"}"\n')
    write_json(layout.config_dir / "settings.json",
               stop_hooks(f"kael-thread-rebuild --config {other} hook-stop"))
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and "instance 'other'" in check.detail
    # The config this doctor runs with is recognised by its path (the appliance's environment).
    mine = tmp_path / "mine.toml"
    write_json(layout.config_dir / "settings.json",
               stop_hooks(f"kael-thread-rebuild --config {mine} hook-stop"))
    assert by_name(run_doctor(config, environ={CONFIG_ENV: str(mine)}))["stop_hook"].ok


def test_stop_hook_of_another_config_named_from_home_is_not_this_instances(
        make_config: ConfigFactory, layout: Layout, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook names its config as a person types it, from their home (`~/…`, which the shell
    that runs the hook expands), or names one whose state dir is in the home of a user this
    host does not know (`~nosuchuser-kael/…`): either is another instance's hook, told apart by
    the instance it names, and doctor says so rather than counting it as this one's."""
    config = make_config(**layout.settings())
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "other.toml").write_text(f'instance = "other"\nproject_dir = "{layout.project_dir}"\n'
                                     f'state_dir = "{tmp_path / "other-state"}"\n')
    write_json(layout.config_dir / "settings.json",
               stop_hooks("kael-thread-rebuild --config ~/other.toml hook-stop"))
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and "--config ~/other.toml is instance 'other'" in check.detail, check

    (home / "other.toml").write_text('instance = "other"\nstate_dir = "~nosuchuser-kael/s"\n')
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and "instance 'other'" in check.detail, check
    assert "~nosuchuser-kael/s" in check.detail, check
    # The same instance name with a state dir this host cannot place: not known to be another.
    (home / "other.toml").write_text(f'instance = "{config.instance}"\n'
                                     'state_dir = "~nosuchuser-kael/s"\n')
    assert by_name(run_doctor(config))["stop_hook"].ok


@pytest.mark.parametrize("hook", [
    "kael-thread-rebuild --config /c.toml hook-stop",
    "docker exec -i kael-thread-rebuild-default kael-thread-rebuild hook-stop",
    "kael-hook --container kael-thread-rebuild-default --config /c.toml --state-dir STATE",
])
def test_pointer_base_fails_when_a_stop_hook_would_feed_the_engine_twice(
        make_config: ConfigFactory, layout: Layout, tmp_path: Path, hook: str) -> None:
    pointer = tmp_path / "pointer"
    pointer.write_text(SESSION + "\n")
    config = make_config(**layout.settings(), activation="pointer",
                         resume_pointer_path=str(pointer))
    local = layout.workdir / ".claude" / "settings.local.json"
    write_json(local, stop_hooks(hook.replace("STATE", str(config.state_dir))))
    write_json(layout.config_dir / "settings.json", {})
    check = by_name(run_doctor(config))["stop_hook"]
    assert not check.ok and not check.skipped
    assert "twice" in check.detail and "pointer-runner.md" in check.detail
    assert str(local) in check.fix


def log_lines(path: Path, *messages: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a") as log:
        for index, message in enumerate(messages):
            log.write(f"2026-11-30T10:18:{index:02d}.000Z {message}\n")


WRAPPER_FAILED = ("hook-wrapper: docker exec into kael-thread-rebuild-main failed (exit 1): Error "
                  "response from daemon: Container 0a1b is not running; the Stop was not recorded")


def test_hook_delivery(make_config: ConfigFactory) -> None:
    config = make_config()
    log = config.state_dir / "hook.log"
    check = by_name(run_doctor(config))["hook_delivery"]
    assert check.ok and "no " in check.detail

    log_lines(log, "hook-stop: operation op-1 -> scheduled", WRAPPER_FAILED)
    check = by_name(run_doctor(config))["hook_delivery"]
    assert not check.ok
    assert check.detail.endswith(f"2026-11-30T10:18:01.000Z {WRAPPER_FAILED}")
    assert check.fix.startswith("start the daemon container (docker start "
                                "kael-thread-rebuild-main")

    log_lines(log, "hook-stop: operation op-2 -> scheduled")  # a later Stop got through
    check = by_name(run_doctor(config))["hook_delivery"]
    assert check.ok and "op-2" in check.detail

    log_lines(log, WRAPPER_FAILED, "hook-wrapper: reached kael-thread-rebuild-main again (a Stop "
                                   "logged above as not recorded was lost)")
    check = by_name(run_doctor(config))["hook_delivery"]
    assert check.ok and "again" in check.detail

    log_lines(log, "hook-wrapper: hook-stop said: kael-thread-rebuild hook-stop: config: file "
                   "not found")
    assert not by_name(run_doctor(config))["hook_delivery"].ok


def test_hook_delivery_reads_only_the_end_of_a_long_log(make_config: ConfigFactory) -> None:
    config = make_config()
    log = config.state_dir / "hook.log"
    log_lines(log, WRAPPER_FAILED, *["hook-stop: operation op-x -> scheduled"] * 5000)
    assert log.stat().st_size > hooks.HOOK_LOG_TAIL_BYTES
    assert by_name(run_doctor(config))["hook_delivery"].ok


def test_mcp_server_beside_the_default_config_dir(make_config: ConfigFactory,
                                                  tmp_path: Path) -> None:
    """CLAUDE_CONFIG_DIR unset: the config dir is ~/.claude and the registration ~/.claude.json."""
    home = tmp_path / "home"
    config_dir = home / ".claude"
    config_dir.mkdir(parents=True)
    config = make_config(claude_config_dir=str(config_dir))
    assert global_state_files(config_dir, home=tmp_path / "elsewhere") == [
        config_dir / ".claude.json", home / ".claude.json"]
    write_json(home / ".claude.json", {"mcpServers": MCP})
    check = by_name(run_doctor(config))["mcp_server"]
    assert check.ok and str(home / ".claude.json") in check.detail

    # In a long-running container that file is not mounted, and says so.
    (home / ".claude.json").unlink()
    unmounted = {UNMOUNTED_ENV: str(home / ".claude.json")}
    check = by_name(run_doctor(config, environ=unmounted))["mcp_server"]
    assert check.ok and check.skipped and "not mounted" in check.detail
    assert "image/run-doctor.sh" in check.detail
    # Where it is mounted after all (doctor's one-off container), it is read.
    write_json(home / ".claude.json", {"mcpServers": {}})
    check = by_name(run_doctor(config, environ=unmounted))["mcp_server"]
    assert not check.ok and not check.skipped


def mcp_container(name: str, state: str = "running", status: str = "Up 2 minutes"
                  ) -> dict[str, str]:
    return {"id": name.encode().hex(), "name": name, "state": state, "status": status}


def test_orphaned_mcp_containers(make_config: ConfigFactory, layout: Layout) -> None:
    config = make_config(**layout.settings())
    one = [mcp_container("kael-mcp-1")]
    check = by_name(run_doctor(config, environ=on_host(mcp_containers=one)))["mcp_containers"]
    assert not check.ok and "1 running for 0 live Claude Code" in check.detail
    assert "kael-mcp-1" in check.fix

    write_registry(layout, os.getpid(), SESSION)  # this process stands in for a live Claude Code
    check = by_name(run_doctor(config, environ=on_host(mcp_containers=one)))["mcp_containers"]
    assert check.ok and check.detail.startswith("1 running for 1 live")

    going = [*one, mcp_container("kael-mcp-2", "removing", "Removal In Progress")]
    assert by_name(run_doctor(config, environ=on_host(mcp_containers=going)))["mcp_containers"].ok
    exited = [*one, mcp_container("kael-mcp-0", "exited", "Exited (137) 3 hours ago")]
    check = by_name(run_doctor(config, environ=on_host(mcp_containers=exited)))["mcp_containers"]
    assert not check.ok and "1 not running: kael-mcp-0 (Exited (137) 3 hours ago)" in check.detail
    assert "kael-mcp-0" in check.fix and "kael-mcp-1" not in check.fix
    # The Engine API's spelling, as the installer passes it on.
    api = [{"Id": "f" * 64, "Names": ["/kael-mcp-9"], "State": "created", "Status": "Created"}]
    check = by_name(run_doctor(config, environ=on_host(mcp_containers=api)))["mcp_containers"]
    assert not check.ok and "kael-mcp-9 (Created)" in check.detail


def test_image_and_daemon_versions(make_config: ConfigFactory) -> None:
    config = make_config()

    def versions(**changes: Any) -> Check:
        return by_name(run_doctor(config, environ=on_host(**changes)))["versions"]

    assert versions().ok
    sound = host_facts()
    newer = {**sound["installed_image"], "id": "sha256:" + "b" * 64,
             "labels": {VERSION_LABEL: "9.9.9"}}
    check = versions(installed_image=newer)
    assert not check.ok
    assert f"runs version {__version__} (aaaaaaaaaaaa) but kael-thread-rebuild:latest is 9.9.9 " \
           "(bbbbbbbbbbbb)" in check.detail
    assert check.fix.startswith("restart the daemon on the installed image")

    rebuilt = {**sound["installed_image"], "id": "sha256:" + "c" * 64,
               "labels": {VERSION_LABEL: __version__, "org.opencontainers.image.revision": "r2"}}
    check = versions(installed_image=rebuilt)
    assert not check.ok and "another build" in check.detail and "revision r1" in check.detail

    daemon = sound["daemons"][0]
    check = versions(daemons=[{**daemon, "engine": "kael-thread-rebuild 0.0.1"}])
    assert not check.ok and "the engine in the daemon says 0.0.1" in check.detail
    check = versions(daemons=[{**daemon, "state": "exited", "engine": ""}])
    assert not check.ok and "is exited" in check.detail
    assert check.fix.startswith("docker start kael-thread-rebuild-default")
    check = versions(daemons=[])
    assert not check.ok and "no daemon container" in check.detail
    check = versions(daemons=[daemon, {**daemon, "name": "/twin"}])
    assert not check.ok and "2 daemon containers" in check.detail
    check = versions(installed_image=None)
    assert not check.ok and "not on this host" in check.detail


def test_a_pointer_instances_claude_user_needs_the_runners_wrapper_lines(
        make_config: ConfigFactory, layout: Layout, tmp_path: Path) -> None:
    """The pointer runner reaches the appliance through the wrapper too (`KAEL_RUN wait` after
    each Stop, `KAEL_RUN start-failed`): sudo must allow those lines of a pointer instance, as
    the installer writes them; a tmux instance needs only the MCP server's and the hook's."""
    pointer = tmp_path / "pointer"
    pointer.write_text(SESSION + "\n")
    config = make_config(**layout.settings(), activation="pointer",
                         resume_pointer_path=str(pointer))
    access = host_facts()["claude_access"]

    def claude_access(config: Config, *allowed: str) -> Check:
        given = on_host(claude_access={**access, "allowed": list(allowed)})
        return by_name(run_doctor(config, environ=given))["claude_access"]

    wrapper = access["wrapper"]
    check = claude_access(config, "mcp default", "hook default")
    assert not check.ok and check.detail == (
        f"sudo does not let the Claude user claude (uid 1000) run `{wrapper} wait default` and "
        f"`{wrapper} start-failed default`, so its pointer runner (KAEL_RUN) can neither wait "
        "for a switch after a Stop nor report a session it could not start"), check
    assert check.fix.startswith("re-run the installer"), check
    check = claude_access(config, "mcp default", "hook default", "wait default")
    assert not check.ok and "start-failed default`, so its pointer runner" in check.detail
    assert "`mcp default`" not in check.detail and "wait default`" not in check.detail
    check = claude_access(config, "mcp default", "hook default", "wait default",
                          "start-failed default")
    assert check.ok and check.detail.endswith(
        f"sudo lets it run {wrapper} mcp|hook|wait|start-failed default"), check
    check = claude_access(config, "wait default", "start-failed default")
    assert not check.ok and "so its MCP server or Stop hook cannot reach" in check.detail
    assert "pointer runner" not in check.detail

    tmux = make_config(**layout.settings())
    check = claude_access(tmux, "mcp default", "hook default")
    assert check.ok and check.detail.endswith(f"sudo lets it run {wrapper} mcp|hook default")


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
        store.transition(op.operation_id, S.scheduled, "test")
        check = by_name(run_doctor(config, now=later))["operations"]
        assert not check.ok and "serve" in check.fix
    finally:
        daemon.release()


def test_a_request_awaiting_the_admin_is_not_stuck_until_it_should_have_expired(
        make_config: ConfigFactory, layout: Layout) -> None:
    config = make_config(**layout.settings(), admin_confirm_minutes=60)
    op = service.request(config, "tidy up", "REBUILD")
    assert op.status is S.awaiting_confirmation
    daemon = worker_lock(config)  # a running daemon takes confirmations and expires requests
    try:
        check = by_name(run_doctor(config, now=utcnow() + timedelta(minutes=30)))["operations"]
        assert check.ok and check.detail == f"none stuck; {op.operation_id} is " \
                                            "awaiting_confirmation", check
        check = by_name(run_doctor(config, now=utcnow() + timedelta(minutes=75)))["operations"]
        assert not check.ok and f"{op.operation_id} has been awaiting_confirmation" \
            in check.detail
        assert check.fix.startswith("it awaits the admin's confirmation and the daemon"), check
    finally:
        daemon.release()


def plant_unsettled_switch(config: Config) -> Operation:
    """An operation a worker left 3 h ago in the middle of a switch (activating, the target
    already changed), with its candidate in project_dir: exactly what recovery acts on, by
    resuming the old session in the live pane."""
    past = utcnow() - timedelta(hours=3)
    new_id = str(uuid.uuid4())
    for name in (f"{new_id}.jsonl", f"{new_id}{MANIFEST_SUFFIX}"):
        (config.project_dir / name).write_text("{}\n")
    steps = [(S.pending, S.scheduled), (S.scheduled, S.running), (S.running, S.verifying),
             (S.verifying, S.activating)]
    op = Operation(
        operation_id=new_operation_id(past), status=S.activating, created_at=past,
        updated_at=past, reason="planted", source_session_id=SESSION,
        source_path=str(config.project_dir / f"{SESSION}.jsonl"), new_session_id=new_id,
        candidate_path=str(config.project_dir / f"{new_id}.jsonl"), switch_target=new_id,
        identity_before=Identity(base="tmux", token={"pane_id": "%0", "pane_pid": "1"}),
        history=[Transition(from_status=a, to_status=b, at=past) for a, b in steps])
    return OperationStore(config.state_dir).create(op)


def test_doctor_cli_and_mcp_tool_change_nothing_with_an_unsettled_operation(
        sound: Config, live: Live, tmp_path: Path) -> None:
    config = sound.model_copy(update={"health_window_seconds": 0.1,
                                      "health_timeout_seconds": 1.0})
    config_path = write_config(config, tmp_path / "kael.toml")
    op = plant_unsettled_switch(config)
    tmux = TmuxBase(config)

    def world() -> tuple[dict[str, tuple[int, int, int]], bytes, Identity]:
        files = {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
                 for p in sorted(tmp_path.rglob("*"))}
        record = (config.state_dir / "operations" / f"{op.operation_id}.json").read_bytes()
        return files, record, tmux.identity()

    before = world()
    cli = procs.run_cli(config_path, "doctor")
    assert cli.returncode == 1, cli.stderr
    line = next(line for line in cli.stdout.splitlines() if " operations " in line)
    assert line.split()[:2] == ["FAIL", "operations"]
    assert f"{op.operation_id} has been activating for 3 h" in line
    assert "fix: the daemon is not driving it: run `kael-thread-rebuild recover`" in line
    assert world() == before

    async def body(session: ClientSession) -> CallToolResult:
        return await call(session, "thread_rebuild_doctor")

    result = with_session(config_path, body)
    assert result.structured_content is not None
    checks = {c["name"]: c for c in result.structured_content["checks"]}
    assert not checks["operations"]["ok"] and "recover" in checks["operations"]["fix"]
    assert world() == before
    assert live.tmux.display(live.target, "#{pane_pid}") == before[2].token["pane_pid"]
    assert service.status(config, op.operation_id) == op


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
    write_json(layout.config_dir / "settings.json", {"permissions": {"allow": []}})
    config = make_config(**layout.settings(), activation="pointer",
                         resume_pointer_path=str(pointer))
    report = run_doctor(config)
    checks = by_name(report)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert checks["target"].detail.startswith("pointer sha256=")
    assert checks["session"].ok and not checks["session"].skipped
    assert checks["resume_command"].skipped
    assert checks["stop_hook"].skipped and "pointer-runner.md" in checks["stop_hook"].detail

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
    live = claude_arguments(["claude", "--channels", "a", "--channels", "b", "--continue"])
    assert live is not None
    assert missing_flags(live, ["--resume", "{session_id}", "--channels", "a"]) == [
        ("--channels", "b")]
    kept, _ = resume_claude_args(["env", "X=1", "claude", "--channels=b", "-r", "{session_id}",
                                  "--channels", "a"])
    assert missing_flags(live, kept) == []


@pytest.mark.parametrize(("resume_command", "args", "wrappers"), [
    (["claude", "--resume", "{session_id}", "--model", "opus"],
     ["--resume", "{session_id}", "--model", "opus"], []),
    (["bash", "-lc", "cd ~/x && exec claude --resume {session_id} --channels 'a b'"],
     ["--resume", "{session_id}", "--channels", "a b"], ["bash -lc"]),
    (["script", "-qfc", "claude --resume {session_id} --verbose", "/dev/null"],
     ["--resume", "{session_id}", "--verbose"], ["script -qfc"]),
    (["/usr/local/bin/start-claude", "--resume", "{session_id}", "--verbose"],
     ["--resume", "{session_id}", "--verbose"], []),  # a program of the household's own
])
def test_resume_command_flags_are_read_through_wrappers(
        resume_command: list[str], args: list[str], wrappers: list[str]) -> None:
    assert resume_claude_args(resume_command) == (args, wrappers)


def test_the_doctor_parses_with_the_installers_module() -> None:
    """One parser: the doctor's functions are the package module that the installer's role
    ships as its module_utils (a copy in plugins/module_utils/kael_claude_code/)."""
    assert doctor_facts.claude_arguments is command_line.claude_arguments
    assert resume.claude_arguments is command_line.claude_arguments
    assert resume.missing_flags is command_line.missing_flags
    for module in (doctor_facts, resume):
        assert not hasattr(module, "_NO_VALUE") and not hasattr(module, "_ALIASES")


# -- the doctor command --------------------------------------------------------------------------


def run_command(config: Config, *flags: str) -> int:
    args = cli.build_parser().parse_args(["doctor", *flags])
    args.json = getattr(args, "json", False)
    return cli.invoke(args.action, config, args, None)


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


def test_doctor_command_exit_0_when_sound(sound: Config, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_FACTS_ENV, on_host()[HOST_FACTS_ENV])
    OperationStore(sound.state_dir)
    daemon = worker_lock(sound)  # a sound household's daemon serves its state dir
    try:
        assert run_command(sound) == 0
    finally:
        daemon.release()
    assert all(line.startswith("ok  ") for line in capsys.readouterr().out.splitlines())
