"""The Claude user needs no Docker access (issue 9): in a household where that user is in no
docker group, it cannot use Docker at all (`docker ps`, `docker run -v /:/host …`), its only way
to the appliance is the root-owned wrapper through sudo, which runs exactly the instance's two
fixed commands and refuses any other argument, instance or image; through it the real Claude
Code, run as that user (`claude -p`, and interactive in a tmux pane), connects to the MCP server,
is told the eight tools, and its Stop reaches the daemon, which switches; doctor checks it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from tests.drill import procs
from tests.guard import MARK
from tests.support.claude_env import (
    DEFAULT_ALLOW,
    ClaudeEnv,
    find_claude_binary,
    make_claude_env,
)
from tests.support.standin_api import StandinAPI
from tests.test_mcp_server import TOOLS

from . import engine
from .household import Household, make_household
from .sudo_household import (
    LIBEXEC,
    PATH,
    UID,
    WRAPPER,
    SudoHousehold,
    claude_instance,
    give_to_claude_user,
    sudo_household,
)
from .test_mcp_container import INITIALIZE

DENIED = b"permission denied while trying to connect to the Docker daemon socket"


def _allowed(home: SudoHousehold, household: Household) -> list[str]:
    (household.root / "pointer").chmod(0o755)
    mcp, _ = home.allow(household.config_path)
    return mcp


def test_the_claude_user_cannot_use_docker(tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        _allowed(home, household)
        for argv in (["docker", "ps"],
                     ["docker", "run", "--rm", "-v", "/:/host", "kael-base:bookworm", "true"]):
            done = home.as_claude(*argv)
            assert done.returncode != 0 and DENIED in done.stderr, (argv, done)
        done = home.as_claude("sudo", "-n", "docker", "ps")
        assert done.returncode == 1 and b"a password is required" in done.stderr, done
        # What sudo lets it run: the wrapper's lines of its own instance (a pointer instance:
        # its runner's wait and start-failed too), nothing else.
        done = home.as_claude("sudo", "-n", "-l")
        rules = [line.strip() for line in done.stdout.decode().splitlines()
                 if "NOPASSWD" in line]
        assert rules == ["(root) NOPASSWD: " + ", ".join(
            f"{WRAPPER} {role} {appliance.name}"
            for role in ("mcp", "hook", "wait", "start-failed"))], done.stdout


def test_doctor_checks_the_claude_users_access(
        tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        _allowed(home, household)
        # allow-user.sh allows this pointer instance's runner its wait and start-failed too.
        check = home.doctor(household.config_path)["claude_access"]
        assert check["ok"] and not check["skipped"], check
        assert check["detail"].startswith("the Claude user household is in no docker group, "
                                          "cannot use unix:///var/run/docker.sock (permission "
                                          "denied"), check
        assert check["detail"].endswith(
            f"sudo lets it run {WRAPPER} mcp|hook|wait|start-failed {appliance.name}"), check

        home.join_docker_group()
        check = home.doctor(household.config_path)["claude_access"]
        assert not check["ok"], check
        assert check["detail"].startswith("the Claude user household (uid 1000) is in the docker "
                                          "group, which is root on this host; the Claude user "
                                          "household (uid 1000) can use the Docker socket")
        assert "gpasswd --delete household docker" in check["fix"]

        home.run("gpasswd", "--delete", "household", "docker")
        home.run(f"{LIBEXEC}/allow-user.sh", "--remove", "--config", str(household.config_path))
        check = home.doctor(household.config_path)["claude_access"]
        assert not check["ok"] and check["detail"].startswith(
            f"sudo does not let the Claude user household (uid 1000) run `{WRAPPER} mcp "
            f"{appliance.name}` and `{WRAPPER} hook {appliance.name}`, so its MCP server or Stop "
            "hook cannot reach the appliance; "), check


def test_the_wrapper_runs_only_its_fixed_commands(
        tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        mcp = _allowed(home, household)
        assert mcp == ["sudo", "-n", WRAPPER, "mcp", appliance.name]
        # The Claude user: any extra argument, another instance, another image: sudo refuses.
        for extra in (["mcp", appliance.name, "--image", "kael-base:bookworm"],
                      ["mcp", appliance.name, "kael-base:bookworm"],
                      ["mcp", f"{appliance.name}-other"], ["hook", appliance.name, "x"],
                      ["mcp"], []):
            done = home.as_claude("sudo", "-n", WRAPPER, *extra)
            assert done.returncode == 1 and b"a password is required" in done.stderr, extra
        # The wrapper itself (even run by root) refuses them too.
        for extra in (["mcp", appliance.name, "--image", "kael-base:bookworm"], ["mcp"],
                      ["shell", appliance.name], ["mcp", "../../tmp/x"]):
            done = home.run(WRAPPER, *extra)
            assert done.returncode == 2 and done.stderr.startswith(b"kael-run: "), (extra, done)
        argv_file = f"/etc/kael-thread-rebuild/{appliance.name}.mcp.argv"
        home.run("chmod", "0664", argv_file)
        done = home.run(WRAPPER, "mcp", appliance.name)
        assert done.returncode == 2 and b"may be written by others" in done.stderr, done
        home.run("sh", "-c", f"printf 'docker\\nrun\\n--privileged\\n-i\\nx\\n' > {argv_file}"
                             f" && chmod 0644 {argv_file}")
        done = home.run(WRAPPER, "mcp", appliance.name)
        assert done.returncode == 2 and b"does not start with 'docker run -i --rm'" in done.stderr

        # Allowed again: the Claude user's MCP server answers on stdio through the wrapper.
        _allowed(home, household)
        done = home.as_claude(*mcp, stdin=INITIALIZE)
        assert done.returncode == 0, done
        answer = orjson.loads(done.stdout.splitlines()[0])
        assert answer["result"]["serverInfo"]["name"] == SERVER_NAME
        engine.wait_gone(lambda: appliance.containers("mcp"), 5)


def _wired(tmp_path: Path, appliance: engine.Instance, api: StandinAPI,
           home: SudoHousehold) -> tuple[ClaudeEnv, Config, dict[str, str]]:
    """A pointer-base instance over a real Claude Code layout, wired as the installer wires it:
    the MCP server and the Stop hook through the wrapper; its daemon running. (The Claude
    env, the config, the environment Claude Code runs with in the household.)"""
    # Claude Code writes its transcript's last lines after the Stop hook has returned; on a
    # loaded machine later than the default quiet time of 0.5 s, and the engine then refuses the
    # switch ("the source transcript changed after prepare"). Wait for 4 s of quiet here.
    env, config, config_path = claude_instance(
        tmp_path, appliance.name, api.url, health_window_seconds=0.5, poll_interval_seconds=0.1,
        stability_samples=3, stability_interval_seconds=2.0)
    mcp, hook = home.allow(config_path)
    assert hook.startswith(f"kael-hook --instance {appliance.name} --run {WRAPPER} ")
    env = make_claude_env(
        tmp_path / "claude", api.url, allow=(*DEFAULT_ALLOW, f"mcp__{SERVER_NAME}"),
        mcp_servers={SERVER_NAME: {"type": "stdio", "command": mcp[0], "args": mcp[1:]}},
        settings={"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": hook, "timeout": 10}]}]}})
    give_to_claude_user(tmp_path / "claude")
    appliance.run_daemon(config_path, f"{UID}:{UID}")
    engine.wait_for_log(config.state_dir / "worker.log", "daemon ready")
    return env, config, {**env.env, "PATH": PATH, "USER": "household"}


def _told_every_tool(api: StandinAPI) -> list[str]:
    """The eight tools the model was not told of (MCP tools are deferred: the model is told
    their names once the server is connected)."""
    told = orjson.dumps(api.message_bodies()).decode()
    return [name for name in sorted(TOOLS) if f"mcp__{SERVER_NAME}__{name}" not in told]


def _request_and_wait(appliance: engine.Instance, config: Config, stop: Callable[[], None],
                      session: str) -> None:
    """Request a rebuild, let STOP make Claude Code stop, and see the daemon switch the
    pointer on that Stop, which the wrapper delivered."""
    assert config.resume_pointer_path is not None
    config.resume_pointer_path.write_text(f"{session}\n")
    code, out = appliance.exec_cli("request", "--reason", "least privilege", "--confirm",
                                   "REBUILD")
    assert code == 0, out
    stop()
    op = appliance.settled_operation(timeout=90)
    assert op.status.value == "activated", op.error
    assert op.new_session_id is not None and op.hook is not None
    assert op.hook.session_id == session
    assert config.resume_pointer_path.read_text().strip() == op.new_session_id
    assert procs.log_lines(config, "hook.log") == [
        f"hook-stop: operation {op.operation_id} -> scheduled"]


def test_real_claude_as_the_claude_user_connects_and_its_stop_switches(
        tmp_path: Path, appliance: engine.Instance) -> None:
    with StandinAPI() as api, sudo_household(tmp_path, appliance,
                                             find_claude_binary()) as home:
        env, config, claude_env = _wired(tmp_path, appliance, api, home)
        first = home.as_claude("claude", "-p", "--", "hello from the household",
                               env=claude_env, workdir=env.cwd)
        assert first.returncode == 0, first
        # The real Claude Code, as the Claude user, starts the server through the wrapper.
        listed = home.as_claude("claude", "mcp", "list", env=claude_env, workdir=env.cwd)
        assert f"{SERVER_NAME}: sudo -n {WRAPPER} mcp {appliance.name} - ✔ Connected" in \
            listed.stdout.decode(), listed
        (transcript,) = env.project_dir.glob("*.jsonl")

        def stop() -> None:
            second = home.as_claude("claude", "-p", "--resume", transcript.stem, "--",
                                    "and now a Stop", env=claude_env, workdir=env.cwd)
            assert second.returncode == 0, second

        _request_and_wait(appliance, config, stop, transcript.stem)
        engine.wait_gone(lambda: appliance.containers("mcp"), 10)


def test_real_claude_in_a_tmux_pane_as_the_claude_user_reaches_the_appliance(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """Interactive in a tmux pane, i.e. with a terminal (where sudo's default use_pty would put
    a pseudo-terminal between Claude Code and the MCP server): the tools, the Stop, the switch."""
    with StandinAPI() as api, sudo_household(tmp_path, appliance,
                                             find_claude_binary()) as home:
        env, config, claude_env = _wired(tmp_path, appliance, api, home)
        socket = tmp_path / "tmux" / "socket"
        socket.parent.mkdir(mode=0o700)
        give_to_claude_user(socket.parent)
        pane = f"{MARK}-least-privilege:0.0"

        def tmux(*args: str) -> str:
            done = home.as_claude("tmux", "-S", str(socket), *args)
            assert done.returncode == 0, done
            return done.stdout.decode()

        def screen_shows(text: str, timeout: float = 90) -> None:
            deadline = time.monotonic() + timeout
            while text not in (shown := tmux("capture-pane", "-p", "-t", pane)):
                assert time.monotonic() < deadline, f"no {text!r} on the screen:\n{shown}"
                time.sleep(0.5)

        tmux("new-session", "-d", "-s", pane.partition(":")[0], "-x", "200", "-y", "50",
             "-c", str(env.cwd), "env", *(f"{key}={value}" for key, value in claude_env.items()),
             "claude")
        def say(text: str) -> None:
            tmux("send-keys", "-t", pane, "-l", text)
            tmux("send-keys", "-t", pane, "Enter")

        screen_shows("❯")
        # The server connects in the background (a cold container start takes seconds on a
        # loaded machine); the next request after that tells the model of its tools.
        for turn in range(8):
            say(f"ping {turn}")
            screen_shows(f"): ping {turn}")  # the stand-in's reply quotes the prompt
            if not _told_every_tool(api):
                break
        assert _told_every_tool(api) == []
        (transcript,) = env.project_dir.glob("*.jsonl")

        _request_and_wait(appliance, config, lambda: say("and now a Stop"), transcript.stem)
        assert [c.status for c in appliance.containers("mcp")] == ["running"]
        tmux("kill-server")
        engine.wait_gone(lambda: appliance.containers("mcp"), 15)


def test_the_wrapper_turns_a_failed_start_on_stdin_into_fixed_arguments(
        tmp_path: Path, appliance: engine.Instance) -> None:
    """The pointer runner reports a session it could not start through `kael-run start-failed
    INSTANCE`: sudo allows it no argument of its own, so the session id and the exit status come
    on stdin, and the wrapper passes them on only as a uuid and a number."""
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        _allowed(home, household)
        # allow-user.sh wrote the fixed command for this pointer instance, as the installer does.
        argv_file = f"/etc/kael-thread-rebuild/{appliance.name}.start-failed.argv"
        done = home.run("cat", argv_file)
        assert done.stdout.decode().splitlines() == [
            "docker", "exec", "-i", appliance.daemon_name, "kael-thread-rebuild",
            "--config", str(household.config_path), "start-failed"], done
        appliance.run_daemon(household.config_path, f"{UID}:{UID}")
        session = "0b8a4a0e-3f55-4c1e-9a57-2f1d3c4b5a69"
        for stdin, why in ((b"", b"no session id"), (f"{session}\n".encode(), b"no exit status"),
                           (b"../../x\n127\n", b"not a session id"),
                           (f"{session} --reason x\n127\n".encode(), b"not a session id"),
                           (f"{session}\n127; rm -rf /\n".encode(), b"not an exit status")):
            done = home.run(WRAPPER, "start-failed", appliance.name, stdin=stdin)
            assert done.returncode == 2 and why in done.stderr, (stdin, done)
        done = home.run(WRAPPER, "start-failed", appliance.name, stdin=f"{session}\n127\n".encode())
        assert done.returncode == 0, done
        assert done.stdout.startswith(b"nothing to do: "), done
