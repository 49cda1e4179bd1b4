"""What the Claude user can do through the wrapper, run as that user through sudo in a household
container with no Docker access: its MCP server's mounts never let root's dockerd follow or
create a path of the user's choosing (issue 22, F2); at most four of its MCP servers run at once
(issue 28, item 3); and `start-failed` right after an activation goes back to the old session
without the confirmation word, which loses nothing (issue 28, item 5; docs/security.md)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from kael_thread_rebuild.operations.model import Operation
from tests.support.claude_env import find_claude_binary, make_claude_env, mcp_log_dir
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import wait_until

from . import engine
from .household import Household, make_household
from .sudo_household import (
    PATH,
    UID,
    USER,
    WRAPPER,
    SudoHousehold,
    give_to_claude_user,
    sudo_household,
)
from .test_least_privilege import _allowed
from .test_mcp_container import INITIALIZE

MCP_MAX = 4  # image/kael-run


def _answers(done: subprocess.CompletedProcess[bytes]) -> None:
    """DONE is an MCP server's run that answered `initialize`."""
    assert done.returncode == 0, done
    answer = orjson.loads(done.stdout.splitlines()[0])
    assert answer["result"]["serverInfo"]["name"] == SERVER_NAME, answer


def _refused(done: subprocess.CompletedProcess[bytes], line: str) -> None:
    assert (done.returncode, done.stdout) == (2, b""), done
    assert done.stderr.decode() == line + "\n", done.stderr


def test_the_mcp_servers_mounts_are_never_followed_or_created_as_root(
        tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    projects = household.config.project_dir.parent  # ~/.claude/projects, in the user's home
    for path in (tmp_path, projects):
        os.chown(path, UID, UID)
    cron = tmp_path / "etc-cron.d"  # root's, as /etc/cron.d is
    cron.mkdir(mode=0o755)
    project = household.config.project_dir
    usage = "(usage: kael-run mcp|hook|wait|start-failed INSTANCE, or advisor USER)"
    with sudo_household(tmp_path, appliance) as home:
        mcp = _allowed(home, household)
        argv_file = f"/etc/kael-thread-rebuild/{appliance.name}.mcp.argv"

        # The Claude user points its projects dir at root's directory: the project dir is now
        # missing there, and root's dockerd (`-v`) would have made it, root-owned.
        moved = home.as_claude("sh", "-c", f"mv {projects} {projects}.away && "
                                           f"ln -s {cron} {projects}")
        assert moved.returncode == 0, moved
        done = home.as_claude(*mcp, stdin=INITIALIZE)
        assert [(p.name, p.stat().st_uid) for p in cron.iterdir()] == []
        _refused(done, f"kael-run: {project} (a mount of {argv_file}) is missing {usage}")
        words = home.run("cat", argv_file).stdout.decode().splitlines()
        assert "-v" not in words and words.count("--mount") == 3, words
        assert f"type=bind,source={project},target={project},readonly" in words
        # Where it exists behind the link, the link is refused rather than followed.
        (cron / project.name).mkdir()
        _refused(home.as_claude(*mcp, stdin=INITIALIZE),
                 f"kael-run: {project} (a mount of {argv_file}) is not its real path "
                 f"({cron / project.name}) {usage}")
        assert appliance.containers("mcp") == []

        # The user's own dirs back: the server answers. A source of another user's is refused.
        home.as_claude("sh", "-c", f"rm {projects} && mv {projects}.away {projects}")
        _answers(home.as_claude(*mcp, stdin=INITIALIZE))
        state = household.config.state_dir
        home.run("chown", f"{UID + 1}", str(state))
        _refused(home.as_claude(*mcp, stdin=INITIALIZE),
                 f"kael-run: {state} (a mount of {argv_file}) belongs to uid {UID + 1}, not to "
                 f"root or uid {UID} {usage}")
        home.run("chown", f"{UID}", str(state))
        # An argv that binds with -v (written before this wrapper) is not run.
        home.run("sh", "-c", f"sed -i 's/^--mount$/-v/' {argv_file}")
        _refused(home.as_claude(*mcp, stdin=INITIALIZE),
                 f"kael-run: {argv_file} binds with -v, which creates a missing source (write "
                 f"it again: the installer) {usage}")
        assert appliance.containers("mcp") == []


@contextmanager
def _servers(home: SudoHousehold, mcp: list[str],
             count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """COUNT MCP servers started by the Claude user through the wrapper, kept open (their stdin
    is closed on leaving)."""
    started = [subprocess.Popen(["docker", "exec", "-i", "-u", USER, home.name, *mcp],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) for _ in range(count)]
    try:
        yield started
    finally:
        for server in started:
            if server.stdin is not None and not server.stdin.closed:
                server.stdin.close()
        for server in started:
            server.wait(timeout=60)


def _running(appliance: engine.Instance) -> int:
    return len([c for c in appliance.containers("mcp") if c.status == "running"])


def test_the_wrapper_refuses_the_fifth_mcp_server_of_an_instance(
        tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    line = (f"kael-run: instance {appliance.name} already runs {MCP_MAX} MCP servers, the most "
            "at once; refused")
    with StandinAPI() as api, sudo_household(tmp_path, appliance, find_claude_binary()) as home:
        mcp = _allowed(home, household)
        claude = make_claude_env(tmp_path / "claude", api.url, mcp_servers={
            SERVER_NAME: {"type": "stdio", "command": mcp[0], "args": mcp[1:]}})
        give_to_claude_user(tmp_path / "claude")
        claude_env = {**claude.env, "PATH": PATH, "USER": USER}
        with _servers(home, mcp, MCP_MAX) as servers:
            wait_until(lambda: _running(appliance) == MCP_MAX, 180,
                       what=f"{MCP_MAX} running MCP containers")
            _refused(home.as_claude(*mcp, stdin=INITIALIZE), line)
            # Claude Code, as the Claude user, shows the server failed and logs the line.
            listed = home.as_claude("claude", "mcp", "list", env=claude_env,
                                    workdir=claude.cwd)
            shown = f"{SERVER_NAME}: sudo -n {WRAPPER} mcp {appliance.name} - ✘ Failed to connect"
            assert shown in listed.stdout.decode(), listed
            logged = [text for path in mcp_log_dir(claude, SERVER_NAME).glob("*.jsonl")
                      for text in path.read_text().splitlines()]
            assert any(line in text for text in logged), logged
            assert _running(appliance) == MCP_MAX
            # One ends (its Claude Code went): the next start gets its place.
            first = servers[0]
            assert first.stdin is not None
            first.stdin.close()
            first.wait(timeout=60)
            _answers(home.as_claude(*mcp, stdin=INITIALIZE))
        # Six at once, none open before: four run, two are refused, whoever comes first.
        with _servers(home, mcp, MCP_MAX + 2) as servers:
            wait_until(lambda: _running(appliance) == MCP_MAX, 180,
                       what=f"{MCP_MAX} running MCP containers")
            wait_until(lambda: len([s for s in servers if s.poll() is not None]) == 2, 60,
                       what="two refused starts")
            refused = [server for server in servers if server.poll() is not None]
            assert [server.returncode for server in refused] == [2, 2]
            assert _running(appliance) == MCP_MAX


def _activated(appliance: engine.Instance, home: SudoHousehold,
               household: Household) -> Operation:
    """A rebuild requested and switched to on a Stop the Claude user's hook delivered."""
    appliance.run_daemon(household.config_path, f"{UID}:{UID}")
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    code, out = appliance.exec_cli("request", "--reason", "start-failed by hand", "--confirm",
                                   "REBUILD")
    assert code == 0, out
    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)
    done = home.as_claude("sudo", "-n", WRAPPER, "hook", appliance.name, stdin=stop)
    assert done.returncode == 0, done
    op = appliance.settled_operation(timeout=90)
    assert op.status.value == "activated", op.error
    return op


def test_start_failed_by_the_claude_user_goes_back_and_loses_nothing(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """The runner's `start-failed` is the Claude user's to call (the runner is one of its
    processes): right after an activation, by hand, it returns to the old session without the
    confirmation word. Nothing is lost: the new session never ran (its transcript is still the
    candidate byte for byte, or the engine refuses), the old transcript was never changed, the
    candidate is kept in the state dir and the backup stays."""
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        _allowed(home, household)
        op = _activated(appliance, home, household)
        new, old = op.new_session_id, household.transcript.stem
        assert new is not None and household.pointer.read_text().strip() == new
        candidate = (household.config.project_dir / f"{new}.jsonl").read_bytes()

        def start_failed(session: str) -> subprocess.CompletedProcess[bytes]:
            return home.as_claude("sh", "-c", f"printf '%s\\n1\\n' {session} | "
                                              f"sudo -n {WRAPPER} start-failed {appliance.name}")

        done = start_failed(old)  # not the session the rebuild switched to: nothing happens
        assert done.returncode == 0 and done.stdout.startswith(b"nothing to do: "), done
        done = start_failed(new)
        assert done.returncode == 0, done
        back = appliance.settled_operation(timeout=90)
        assert (back.operation_id, back.status.value) == (op.operation_id, "rolled_back")
        assert household.pointer.read_text().strip() == old
        assert household.transcript.read_bytes() == household.original
        assert back.backup_path is not None
        assert Path(back.backup_path).read_bytes() == household.original
        assert back.candidate_path is not None
        kept = Path(back.candidate_path).read_bytes()
        assert kept == candidate and hashlib.sha256(kept).hexdigest() == op.candidate_sha256
        assert not (household.config.project_dir / f"{new}.jsonl").exists()
