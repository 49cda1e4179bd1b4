"""The Claude user needs no Docker access (issue 9): in a household where that user is in no
docker group, it cannot use Docker at all (`docker ps`, `docker run -v /:/host …`), its only way
to the appliance is the root-owned wrapper through sudo, which runs exactly the instance's two
fixed commands and refuses any other argument, instance or image; through it the real Claude
Code, run as that user, gets the seven tools and its Stop reaches the daemon, which switches."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from kael_thread_rebuild.doctor import SERVER_NAME
from tests.drill import procs
from tests.guard import MARK, TEST_SOCKET_PREFIX
from tests.support.claude_env import DEFAULT_ALLOW, find_claude_binary, make_claude_env
from tests.support.standin_api import StandinAPI
from tests.test_mcp_server import SEVEN

from . import engine
from .household import Household, make_household
from .sudo_household import PATH, UID, WRAPPER, SudoHousehold, sudo_household
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
        env = make_claude_env(tmp_path / "claude", api.url)
        env.project_dir.mkdir(parents=True)
        state, pointer = tmp_path / "state", tmp_path / "pointer" / "session"
        state.mkdir(mode=0o700)
        pointer.parent.mkdir()
        pointer.write_text("none-yet\n")
        config_path = tmp_path / "kael.toml"
        config = procs.write_config(config_path, {
            "instance": appliance.name, "project_dir": env.project_dir,
            "claude_config_dir": env.config_dir, "claude_workdir": env.cwd,
            "state_dir": state, "activation": "pointer", "resume_pointer_path": pointer,
            "health_window_seconds": 0.5, "poll_interval_seconds": 0.1,
            "tmux_target": f"{MARK}-unused:0.0",
            "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-unused"})
        config_path.chmod(0o644)
        mcp, hook = home.allow(config_path)
        assert hook.startswith(f"kael-hook --instance {appliance.name} --run {WRAPPER} ")
        env = make_claude_env(
            tmp_path / "claude", api.url, allow=(*DEFAULT_ALLOW, f"mcp__{SERVER_NAME}"),
            mcp_servers={SERVER_NAME: {"type": "stdio", "command": mcp[0], "args": mcp[1:]}},
            settings={"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": hook, "timeout": 10}]}]}})
        for path in (tmp_path / "claude", state, pointer.parent):
            for walk_root, dirs, files in os.walk(path):
                for entry in (walk_root, *(os.path.join(walk_root, f) for f in dirs + files)):
                    os.chown(entry, UID, UID)
        claude_env = {**env.env, "PATH": PATH, "USER": "household"}
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
