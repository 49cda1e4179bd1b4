"""The advisor's image as Claude Code runs it: `docker run -i --rm ...` of
image/advisor/mcp-command.sh, hardened, as the uid it is given. The real client opens it, a
consultation runs the image's Kimi Code CLI against the provider stand-in on the host's loopback,
and what it writes belongs to that uid; the project stays untouched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

from kael_advisor import pieces
from tests.advisor.kimi_fixture import assert_searches_found, project_searches
from tests.appliance import engine
from tests.support.kimi_env import kimi_config_toml
from tests.support.standin_openai import (
    Reply,
    StandinOpenAI,
    ToolCall,
    message_texts,
    tool_messages,
    user_prompts,
)

REPO = Path(__file__).resolve().parents[2]
MCP_COMMAND = REPO / "image" / "advisor" / "mcp-command.sh"
ADVISOR_IMAGE_ENV = "KAEL_ADVISOR_IMAGE"
FIVE = {"advisor_consult", "advisor_poll", "advisor_create_task", "advisor_list_tasks",
        "advisor_close_task"}
UID, GID = engine.TEST_UID, engine.TEST_GID


@pytest.fixture(scope="module")
def dock() -> docker.DockerClient:
    """The engine, or a skip saying why there is none (as the appliance tests do)."""
    problem = engine.engine_problem()
    if problem:
        pytest.skip(problem)
    return engine.client()


@pytest.fixture(scope="module")
def appliance_image(dock: docker.DockerClient) -> str:
    return engine.ensure_image(dock)


@pytest.fixture(scope="module")
def advisor_image(appliance_image: str) -> str:
    """``$KAEL_ADVISOR_IMAGE``, else ``kael-advisor:latest``, which image/build.sh builds with
    the appliance image (ensured first)."""
    return os.environ.get(ADVISOR_IMAGE_ENV) or "kael-advisor:latest"


@dataclass
class Place:
    """A Claude user's project, hook directory and Kimi home, owned by UID."""

    project: Path
    sessions: Path
    kimi_home: Path
    claude_session: str

    def command(self, image: str) -> list[str]:
        done = subprocess.run(
            [str(MCP_COMMAND), "--project", str(self.project), "--sessions", str(self.sessions),
             "--kimi-home", str(self.kimi_home), "--user", f"{UID}:{GID}", "--image", image,
             "--network", "host"],
            capture_output=True, text=True, check=True, timeout=30)
        return done.stdout.splitlines()


def _chown_tree(root: Path) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, UID, GID)


@pytest.fixture
def place(tmp_path: Path, api: StandinOpenAI) -> Place:
    project, sessions, kimi_home = (tmp_path / "project", tmp_path / "sessions",
                                    tmp_path / "kimi-home")
    for folder in (project / ".agent", kimi_home):
        folder.mkdir(parents=True)
    (project / "README.md").write_text("a project the advisor may read\n")
    (kimi_home / "config.toml").write_text(kimi_config_toml(api.url))
    found = Place(project, sessions, kimi_home, str(uuid.uuid4()))
    # The real prompt hook, on the host, says which conversation this window is in.
    event = {"session_id": found.claude_session, "cwd": str(project),
             "hook_event_name": "UserPromptSubmit", "prompt": "review it"}
    subprocess.run([sys.executable, "-m", "kael_advisor.hook"], input=json.dumps(event),
                   text=True, check=True, timeout=30,
                   env={**os.environ, "KAEL_ADVISOR_SESSIONS": str(sessions)})
    assert list(sessions.glob("*.json")), "the hook wrote no window file"
    _chown_tree(tmp_path)
    return found


@pytest.fixture
def api() -> Iterator[StandinOpenAI]:
    with StandinOpenAI() as server:
        yield server


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def _consult(command: list[str], message: str) -> tuple[Any, set[str], str, str]:
    """Opens the server of COMMAND as Claude Code does, consults it in review mode and polls
    until the answer: the opening, the tool names, the start and the answer."""
    async def session() -> tuple[Any, set[str], str, str]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            tools = {tool.name for tool in (await client.list_tools()).tools}
            started = _text(await client.call_tool(
                "advisor_consult", {"message": message, "mode": "review"}))
            match = re.search(r"#(\S+)", started)
            assert match, started
            deadline = time.monotonic() + 60
            while True:
                answer = _text(await client.call_tool("advisor_poll", {"task": match[1]}))
                if not answer.startswith("⏳") or time.monotonic() > deadline:
                    return init, tools, started, answer
                await anyio.sleep(0.2)

    return anyio.run(session)


def test_the_image_consults_kimi_as_the_given_uid_and_cannot_write_the_project(
        advisor_image: str, place: Place, api: StandinOpenAI) -> None:
    pwned = place.project / "written-by-the-advisor.txt"
    api.queue(Reply("let me fix it myself", tool_calls=[
                  ToolCall("Write", {"path": str(pwned), "content": "x"}),
                  ToolCall("Bash", {"command": f"touch {pwned}"})]),
              Reply("verdict: the plan is sound"))
    init, tools, started, answer = _consult(place.command(advisor_image), "Is the plan sound?")
    assert init.server_info.name == "advisor-mcp"
    assert tools == FIVE
    assert started.startswith("⏳ consultation started"), started
    assert "verdict: the plan is sound" in answer, answer
    [first, second] = api.chat_bodies()
    assert "Is the plan sound?" in user_prompts(first)[-1]
    # The read-only agent has no Write and no Bash; the project is mounted read-only anyway.
    assert not pwned.exists()
    assert {t["function"]["name"] for t in first["tools"]} <= {"Read", "Glob", "Grep"}
    refusals = [m["content"] for m in tool_messages(second)]
    assert len(refusals) == 2 and 'Tool "Write" not found' in str(refusals[0]), refusals
    assert all("Tool execution failed" in str(r) for r in refusals), refusals
    # Everything the server and the CLI wrote belongs to the uid the container ran as.
    table = place.project / ".agent" / "advisor-tasks.json"
    assert (table.stat().st_uid, table.stat().st_gid) == (UID, GID)
    written = [p for p in place.kimi_home.rglob("*") if p.stat().st_mtime > 0]
    assert written and {p.stat().st_uid for p in written} == {UID}
    assert place.claude_session in table.read_text()


def test_glob_and_grep_in_the_image_find_the_project_files(advisor_image: str, place: Place,
                                                           api: StandinOpenAI) -> None:
    """The image's rg (Debian's ripgrep) runs Kimi's Glob and Grep; without it both fail, as
    Kimi's download of an rg does not succeed from the container."""
    api.queue(Reply("Let me look.", tool_calls=project_searches(place.project)),
              Reply("verdict: found it in src/plum.py"))

    *_, answer = _consult(place.command(advisor_image), "Where is the word?")

    assert "verdict: found it" in answer, answer
    assert_searches_found(message_texts(api.chat_bodies()[-1], "tool"))


def test_the_appliance_image_holds_no_node_and_no_kimi(dock: docker.DockerClient,
                                                      appliance_image: str,
                                                      advisor_image: str) -> None:
    """The rebuild's image does not grow: the Kimi Code CLI, its Node and ripgrep are the
    advisor's."""
    probe = ("test ! -e /opt/kimi-code && ! command -v node && ! command -v kimi"
             " && ! command -v rg && echo clean")
    out = dock.containers.run(appliance_image, ["-c", probe], entrypoint="sh", remove=True)
    assert out.decode().strip() == "clean"
    advisor = dock.images.get(advisor_image)
    appliance = dock.images.get(appliance_image)
    assert advisor.labels["io.kael-thread-rebuild.role"] == "advisor"
    # Built on the appliance's layers, which it shares: the pinned CLI and its Node come on top.
    layers = appliance.attrs["RootFS"]["Layers"]
    assert advisor.attrs["RootFS"]["Layers"][:len(layers)] == layers, (
        f"{advisor_image} was not built from {appliance_image}: image/build.sh builds both "
        f"(or name a pair with KAEL_APPLIANCE_IMAGE and {ADVISOR_IMAGE_ENV})")


def test_the_command_makes_missing_sources_as_the_caller(tmp_path: Path) -> None:
    """Docker would create a missing mount source as root: the command makes each one first."""
    project = tmp_path / "project"
    project.mkdir()
    sessions, kimi_home = tmp_path / "claude" / "sessions", tmp_path / "kimi-home"
    done = subprocess.run([str(MCP_COMMAND), "--sessions", str(sessions), "--kimi-home",
                           str(kimi_home), "--image", "some-image"], cwd=project,
                          capture_output=True, text=True, timeout=30, check=True)
    words = done.stdout.splitlines()
    assert words[:4] == ["docker", "run", "-i", "--rm"] and words[-1] == "some-image"
    assert "-v" not in words
    assert _mounts(words) == [f"{project},target={project},readonly",
                              f"{project}/.agent,target={project}/.agent",
                              f"{sessions},target={sessions},readonly",
                              f"{kimi_home},target={kimi_home}"]
    assert (project / ".agent").is_dir() and kimi_home.is_dir()
    assert sessions.stat().st_mode & 0o777 == 0o700
    assert words[words.index("-w") + 1] == str(project)
    assert words[words.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"
    assert {"--read-only", "--init"} <= set(words) and "--network" not in words
    assert words[words.index("--cap-drop") + 1] == "ALL"


def _mounts(words: list[str]) -> list[str]:
    """The --mount values of WORDS, each after its `type=bind,source=`."""
    found = [words[i + 1] for i, word in enumerate(words) if word == "--mount"]
    assert all(value.startswith("type=bind,source=") for value in found), found
    return [value.removeprefix("type=bind,source=") for value in found]


def test_the_fixed_part_for_the_wrapper_names_no_project(tmp_path: Path) -> None:
    """--no-project prints what the installer writes to NAME.advisor.argv: the hook's
    directory and the Kimi home, no project and no -w, the image last; it creates nothing and
    needs the user named."""
    sessions, kimi_home = tmp_path / "sessions", tmp_path / "kimi-home"
    fixed = [str(MCP_COMMAND), "--no-project", "--sessions", str(sessions), "--kimi-home",
             str(kimi_home), "--image", "some-image", "--network", "host"]
    missing = subprocess.run([*fixed, "--user", "1234:1235"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=30, check=False)
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
    assert not sessions.exists() and not kimi_home.exists()
    sessions.mkdir()
    kimi_home.mkdir()
    no_user = subprocess.run(fixed, capture_output=True, text=True, timeout=30, check=False)
    assert no_user.returncode == 2 and "--no-project needs --user" in no_user.stderr

    done = subprocess.run([*fixed, "--user", "1234:1235"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30, check=True)
    words = done.stdout.splitlines()
    assert words[:4] == ["docker", "run", "-i", "--rm"] and words[-1] == "some-image"
    assert "-v" not in words and "-w" not in words and str(tmp_path) not in words
    assert _mounts(words) == [f"{sessions},target={sessions},readonly",
                              f"{kimi_home},target={kimi_home}"]
    assert words[words.index("--user") + 1] == "1234:1235"
    assert words[words.index("--network") + 1] == "host"
    assert not (tmp_path / ".agent").exists()


def test_the_command_help_registers_the_server_the_permissions_name() -> None:
    """--help shows the registration: per project (the line names the project's path) and as
    advisor-mcp, the server the settings block's permissions name; and the loopback option."""
    done = subprocess.run([str(MCP_COMMAND), "--help"], capture_output=True, text=True,
                          timeout=30, check=True)

    assert f"claude mcp add -s local {pieces.SERVER_NAME} -- " in done.stdout
    assert "--network host" in done.stdout
    assert all(line.startswith("#") for line in done.stdout.splitlines()), done.stdout


def test_doctor_in_the_image_finds_the_pinned_kimi(advisor_image: str, place: Place) -> None:
    command = place.command(advisor_image)
    image = command.pop()
    done = subprocess.run([*command, "--entrypoint", "kael-advisor", image, "doctor"],
                          capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert any(re.match(r"ok +kimi +/opt/kimi-code/bin/kimi 2\.1\.0$", line) for line in lines), \
        done.stdout + done.stderr
    assert any(re.match(r"ok +provider", line) for line in lines), done.stdout
