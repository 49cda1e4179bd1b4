"""The Claude user needs no Docker access (issue 9): in a household where that user is in no
docker group, it cannot use Docker at all (`docker ps`, `docker run -v /:/host …`), its only way
to the appliance is the root-owned wrapper through sudo, which runs exactly the instance's two
fixed commands and refuses any other argument, instance or image; through it the real Claude
Code, run as that user, gets the seven tools and its Stop reaches the daemon, which switches."""

from __future__ import annotations

from pathlib import Path

import orjson

from kael_thread_rebuild.doctor import SERVER_NAME
from tests.drill import procs
from tests.support.claude_env import DEFAULT_ALLOW, find_claude_binary, make_claude_env
from tests.support.standin_api import StandinAPI
from tests.test_mcp_server import SEVEN

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
        # What sudo lets it run: the wrapper's two lines of its own instance, nothing else.
        done = home.as_claude("sudo", "-n", "-l")
        rules = [line.strip() for line in done.stdout.decode().splitlines()
                 if "NOPASSWD" in line]
        assert rules == [f"(root) NOPASSWD: {WRAPPER} mcp {appliance.name}, "
                         f"{WRAPPER} hook {appliance.name}"], done.stdout


def test_doctor_checks_the_claude_users_access(
        tmp_path: Path, appliance: engine.Instance) -> None:
    household = make_household(tmp_path, appliance.name, UID, UID)
    with sudo_household(tmp_path, appliance) as home:
        _allowed(home, household)
        check = home.doctor(household.config_path)["claude_access"]
        assert check["ok"] and not check["skipped"], check
        assert check["detail"].startswith("the Claude user household is in no docker group, "
                                          "cannot use unix:///var/run/docker.sock (permission "
                                          "denied"), check
        assert check["detail"].endswith(f"sudo lets it run {WRAPPER} mcp|hook {appliance.name}")

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
        assert not check["ok"] and check["detail"] == (
            f"sudo does not let the Claude user household (uid 1000) run `{WRAPPER} mcp "
            f"{appliance.name}` and `{WRAPPER} hook {appliance.name}`, so its MCP server or Stop "
            "hook cannot reach the appliance"), check


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


def test_real_claude_as_the_claude_user_gets_the_tools_and_its_stop_switches(
        tmp_path: Path, appliance: engine.Instance) -> None:
    with StandinAPI() as api, sudo_household(tmp_path, appliance,
                                             find_claude_binary()) as home:
        env, config, config_path = claude_instance(
            tmp_path, appliance.name, api.url, health_window_seconds=0.5,
            poll_interval_seconds=0.1)
        state, pointer = config.state_dir, config.resume_pointer_path
        assert pointer is not None
        mcp, hook = home.allow(config_path)
        assert hook.startswith(f"kael-hook --instance {appliance.name} --run {WRAPPER} ")
        env = make_claude_env(
            tmp_path / "claude", api.url, allow=(*DEFAULT_ALLOW, f"mcp__{SERVER_NAME}"),
            mcp_servers={SERVER_NAME: {"type": "stdio", "command": mcp[0], "args": mcp[1:]}},
            settings={"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": hook, "timeout": 10}]}]}})
        give_to_claude_user(tmp_path / "claude")
        # Claude Code connects MCP servers without waiting by default; a cold container start on
        # a loaded machine takes seconds, and a one-turn `claude -p` would be over before the
        # tools are announced. Make it wait (up to 60 s), as an interactive session has time to.
        claude_env = {**env.env, "PATH": PATH, "USER": "household",
                      "MCP_CONNECTION_NONBLOCKING": "false", "MCP_TIMEOUT": "60000"}
        appliance.run_daemon(config_path, f"{UID}:{UID}")
        engine.wait_for_log(state / "worker.log", "daemon ready")

        first = home.as_claude("claude", "-p", "--", "hello from the household",
                               env=claude_env, workdir=env.cwd)
        assert first.returncode == 0, first
        # MCP tools are deferred: the model is told their names once the server is connected.
        told = orjson.dumps(api.message_bodies()).decode()
        assert [name for name in sorted(SEVEN) if f"mcp__{SERVER_NAME}__{name}" not in told] == []
        (transcript,) = env.project_dir.glob("*.jsonl")
        session = transcript.stem
        pointer.write_text(f"{session}\n")

        code, out = appliance.exec_cli("request", "--reason", "least privilege", "--confirm",
                                       "REBUILD")
        assert code == 0, out
        second = home.as_claude("claude", "-p", "--resume", session, "--", "and now a Stop",
                                env=claude_env, workdir=env.cwd)
        assert second.returncode == 0, second

        op = procs.wait_for_status(config, procs.SETTLED, timeout=90)
        assert op.status.value == "activated", op.error
        assert op.new_session_id is not None and op.hook is not None
        assert op.hook.session_id == session
        assert pointer.read_text().strip() == op.new_session_id
        assert procs.log_lines(config, "hook.log") == [
            f"hook-stop: operation {op.operation_id} -> scheduled"]
        engine.wait_gone(lambda: appliance.containers("mcp"), 10)
