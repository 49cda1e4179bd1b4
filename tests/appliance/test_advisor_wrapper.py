"""The wrapper's advisor role as the Claude user runs it: `sudo -n kael-run advisor USER` in a
household container whose user has no Docker access. The project is the caller's working
directory, refused unless it is the caller's own directory under the configured roots, reached
with no link leading out; `.agent/` is made as the caller; the argv must be root's and run as the
caller; nothing of the caller's environment reaches the command; the advisor's MCP server
answers `initialize` and `tools/list` through it (docs/security.md, "The advisor's role")."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.advisor.test_image import ADVISOR_IMAGE_ENV, FIVE
from tests.support.claude_env import find_claude_binary

from . import engine
from .sudo_household import LIBEXEC, PATH, UID, USER, WRAPPER, SudoHousehold, sudo_household
from .test_least_privilege import DENIED

MCP_COMMAND = engine.REPO / "image" / "advisor" / "mcp-command.sh"
RUN_DIR = "/etc/kael-thread-rebuild"
ARGV = f"{RUN_DIR}/{USER}.advisor.argv"
ROOTS = f"{RUN_DIR}/{USER}.advisor.roots"
USAGE = "(usage: kael-run mcp|hook|wait|start-failed INSTANCE, or advisor USER)"
ADVISOR = ("sudo", "-n", WRAPPER, "advisor", USER)


def _message(method: str, ident: int | None = None, **params: Any) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if ident is not None:
        body["id"] = ident
    if params:
        body["params"] = params
    return orjson.dumps(body) + b"\n"


INITIALIZE = _message("initialize", 1, protocolVersion="2025-06-18", capabilities={},
                      clientInfo={"name": "advisor-wrapper-test", "version": "0"})


@dataclass
class Advisor:
    """The Claude user's side: its home (the one root), a project in it, the household."""

    home: SudoHousehold
    user_home: Path
    project: Path
    image: str

    def write_argv(self, user: str = f"{UID}:{UID}") -> list[str]:
        """The installer's NAME.advisor.argv (root:root 0644), from mcp-command.sh --no-project."""
        done = subprocess.run(
            [str(MCP_COMMAND), "--no-project", "--user", user, "--sessions",
             str(self.user_home / ".claude" / "kael-advisor-sessions"), "--kimi-home",
             str(self.user_home / ".kimi-code"), "--image", self.image],
            capture_output=True, text=True, check=True, timeout=30)
        self._root_file(ARGV, done.stdout)
        return done.stdout.splitlines()

    def _root_file(self, path: str, text: str) -> None:
        done = self.home.run("sh", "-c", f"mkdir -p -m 0755 {RUN_DIR} && cat >{path} "
                             f"&& chown 0:0 {path} && chmod 0644 {path}", stdin=text.encode())
        assert done.returncode == 0, done

    def call(self, workdir: Path, stdin: bytes = INITIALIZE,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        """The registered command, as the Claude user, in WORKDIR."""
        return self.home.as_claude(*ADVISOR, stdin=stdin, workdir=workdir, env=env)

    def refused(self, workdir: Path, line: str) -> str:
        done = self.call(workdir)
        said = done.stderr.decode()
        assert (done.returncode, done.stdout, said) == (2, b"", f"kael-run: {line} {USAGE}\n"), \
            done
        print(f"refused in {workdir}: {said.strip()}")
        return said


@pytest.fixture
def advisor(tmp_path: Path, appliance: engine.Instance) -> Any:
    image = os.environ.get(ADVISOR_IMAGE_ENV) or "kael-advisor:latest"
    user_home = tmp_path / "home" / USER
    project = user_home / "project"
    sessions = user_home / ".claude" / "kael-advisor-sessions"
    for folder in (project, sessions, user_home / ".kimi-code"):
        folder.mkdir(parents=True)
    sessions.chmod(0o700)
    (project / "README.md").write_text("the advisor may read this\n")
    for folder, _, files in os.walk(user_home):
        for path in [folder, *(os.path.join(folder, name) for name in files)]:
            os.chown(path, UID, UID)
    with sudo_household(tmp_path, appliance, find_claude_binary()) as home:
        found = Advisor(home, user_home, project, image)
        found.write_argv()
        found._root_file(ROOTS, f"{user_home}\n")
        rule = home.run("bash", "-c", f". {LIBEXEC}/lib.sh && kael_sudoers_rule {UID} {WRAPPER} "
                        f"{USER} advisor >/etc/sudoers.d/kael-advisor-{USER} "
                        f"&& chmod 0440 /etc/sudoers.d/kael-advisor-{USER}")
        assert rule.returncode == 0, rule
        yield found


def _serve(advisor: Advisor, env: Mapping[str, str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Opens the server through the wrapper as Claude Code would (initialize, initialized,
    tools/list), reading each answer before the next request: (the answers, the environment of
    the server's container while it runs)."""
    options = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    server = subprocess.Popen(["docker", "exec", "-i", "-u", USER, "-w", str(advisor.project),
                               *options, advisor.home.name, *ADVISOR],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    answers = []
    try:
        for request in (INITIALIZE, _message("notifications/initialized"),
                        _message("tools/list", 2)):
            server.stdin.write(request)
            server.stdin.flush()
            if b'"id"' in request:
                answers.append(orjson.loads(server.stdout.readline()))
        listed = subprocess.run(
            ["docker", "ps", "-q", "--filter", "label=io.kael-thread-rebuild.role=advisor-mcp",
             "--filter", f"volume={advisor.project}"], capture_output=True, text=True,
            check=True, timeout=30).stdout.split()
        assert len(listed) == 1, listed
        inspected = subprocess.run(["docker", "inspect", "-f", "{{json .Config.Env}}", *listed],
                                   capture_output=True, check=True, timeout=30)
        environment: list[str] = orjson.loads(inspected.stdout)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert server.returncode == 0, server.stderr.read() if server.stderr else ""
    return answers, environment


def test_the_advisor_answers_through_the_wrapper_and_nothing_of_the_caller_reaches_it(
        advisor: Advisor) -> None:
    canary = {"DOCKER_HOST": "tcp://127.0.0.1:9", "LD_PRELOAD": "/nonexistent/preload.so",
              "KAEL_CALLER_CANARY": "from-the-caller"}
    assert not (advisor.project / ".agent").exists()

    [init, tools], environment = _serve(advisor, canary)

    assert init["result"]["serverInfo"]["name"] == "advisor-mcp", init
    assert {tool["name"] for tool in tools["result"]["tools"]} == FIVE, tools
    # DOCKER_HOST would have sent docker elsewhere; none of the caller's names is inside.
    assert not [line for line in environment if line.partition("=")[0] in canary], environment
    sessions = advisor.user_home / ".claude" / "kael-advisor-sessions"
    assert f"KAEL_ADVISOR_SESSIONS={sessions}" in environment
    agent = (advisor.project / ".agent").stat()
    assert (agent.st_uid, agent.st_gid, agent.st_mode & 0o777) == (UID, UID, 0o700)
    # sudo keeps it out too: asking to keep a variable is refused.
    kept = advisor.home.as_claude("sudo", "-n", "--preserve-env=DOCKER_HOST", *ADVISOR[2:],
                                  workdir=advisor.project, env=canary)
    assert (kept.returncode, kept.stderr) == (1, b"sudo: sorry, you are not allowed to set the "
                                                 b"following environment variables: "
                                                 b"DOCKER_HOST\n"), kept
    # The Claude user still has no Docker: only the wrapper's line through sudo.
    for argv in (["docker", "ps"], ["sudo", "-n", "docker", "ps"]):
        done = advisor.home.as_claude(*argv)
        assert done.returncode != 0 and (DENIED in done.stderr
                                         or b"a password is required" in done.stderr), done
    rules = [line.strip() for line in
             advisor.home.as_claude("sudo", "-n", "-l").stdout.decode().splitlines()
             if "NOPASSWD" in line]
    assert rules == [f"(root) NOPASSWD: {WRAPPER} advisor {USER}"], rules


def test_the_real_claude_code_connects_to_the_advisor_through_the_wrapper(
        advisor: Advisor) -> None:
    """Registered as the installer registers it (user scope), the real Claude Code as the user
    starts the server through sudo and the wrapper, in the project it runs in."""
    env = {"HOME": str(advisor.user_home), "PATH": PATH,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    added = advisor.home.as_claude("claude", "mcp", "add", "-s", "user", "advisor-mcp", "--",
                                   *ADVISOR, env=env, workdir=advisor.user_home)
    assert added.returncode == 0, added
    listed = advisor.home.as_claude("claude", "mcp", "list", env=env, workdir=advisor.project)
    shown = f"advisor-mcp: {' '.join(ADVISOR)} - ✔ Connected"
    assert shown in listed.stdout.decode(), listed
    print(shown)
    assert (advisor.project / ".agent").stat().st_uid == UID


def test_the_wrapper_refuses_a_project_that_is_not_the_callers_own_under_its_roots(
        advisor: Advisor, tmp_path: Path) -> None:
    home = advisor.home
    # Not the caller's: root's directory inside the user's home.
    roots_own = advisor.user_home / "roots-own"
    roots_own.mkdir(mode=0o755)
    advisor.refused(roots_own, f"advisor: {roots_own} is not the caller's (uid {UID}) own "
                               "directory")
    assert not (roots_own / ".agent").exists()
    # The caller's own, but outside the roots.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chown(elsewhere, UID, UID)
    advisor.refused(elsewhere, f"advisor: {elsewhere} lies outside the roots in {ROOTS}")
    # Reached through a link in the home that leads out: the real path is outside.
    link = advisor.user_home / "link-out"
    link.symlink_to(elsewhere)
    os.lchown(link, UID, UID)
    advisor.refused(link, f"advisor: {elsewhere} lies outside the roots in {ROOTS}")
    assert not (elsewhere / ".agent").exists()
    # A .agent that is a link to root's directory is not followed.
    root_dir = tmp_path / "roots-dir"
    root_dir.mkdir()
    (advisor.project / ".agent").symlink_to(root_dir)
    os.lchown(advisor.project / ".agent", UID, UID)
    advisor.refused(advisor.project, f"{advisor.project}/.agent (a mount of {ARGV}) is not its "
                                     f"real path ({root_dir})")
    (advisor.project / ".agent").unlink()
    assert list(root_dir.iterdir()) == []
    # A root that is itself a link of the user's counts for nothing.
    advisor._root_file(ROOTS, f"{link}\n")
    advisor.refused(link, f"advisor: {elsewhere} lies outside the roots in {ROOTS}")
    advisor._root_file(ROOTS, f"{advisor.user_home}\n")
    # A foreign argv: the caller's, writable by others, or running as another uid.
    home.run("chown", f"{UID}", ARGV)
    advisor.refused(advisor.project, f"{ARGV} is not owned by root")
    home.run("chown", "0", ARGV)
    home.run("chmod", "0666", ARGV)
    advisor.refused(advisor.project, f"{ARGV} may be written by others than root")
    home.run("chmod", "0644", ARGV)
    advisor.write_argv(user=f"{UID + 1}:{UID + 1}")
    advisor.refused(advisor.project, f"{ARGV} runs as uid {UID + 1}, not as the caller "
                                     f"(uid {UID})")
    # A roots file of the caller's is no roots file.
    advisor.write_argv()
    home.run("chown", f"{UID}", ROOTS)
    advisor.refused(advisor.project, f"{ROOTS} is not owned by root")
    home.run("chown", "0", ROOTS)
    # Nothing was made as root, and nothing ran.
    assert not (advisor.project / ".agent").exists()
    done = advisor.call(advisor.project)
    assert done.returncode == 0 and b'"advisor-mcp"' in done.stdout, done
