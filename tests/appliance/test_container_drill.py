"""The live drill with the engine in containers: the real Claude Code interactive in a tmux pane on
the host (private socket), our MCP server registered as `docker run -i --rm ...`, the Stop hook
as `kael-hook` (`docker exec` into the daemon container), and the daemon container switching the
host's pane through the mounted tmux socket dir, then rolling it back. The scenario, the stage's
helpers and the assertions are those of `tests/drill/test_tmux_drill.py`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from tests.drill import live, procs, steps
from tests.guard import tmux_socket_dir
from tests.support.claude_env import (
    DEFAULT_ALLOW,
    TmuxClaude,
    claude_available,
    find_claude_binary,
    make_claude_env,
    tmux_available,
)
from tests.support.standin_api import StandinAPI

from . import engine

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not tmux_available(), reason="tmux is not installed"),
]
#: Claude Code's own shutdown comes first; then the MCP container must go (2 s after EOF).
MCP_GONE_AFTER_EXIT_SECONDS = 10.0


class ContainerStage(live.Stage):
    """`live.Stage` whose CLI is `docker exec` into the daemon container."""

    daemon_name: str = ""

    def cli(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["docker", "exec", "-i", self.daemon_name, "kael-thread-rebuild",
                               "--config", str(self.config_path), *args],
                              input=stdin, capture_output=True, timeout=60, check=False)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                           done.stderr.decode())


@contextlib.contextmanager
def container_stage(root: Path, appliance: engine.Instance,
                    **config_overrides: Any) -> Iterator[ContainerStage]:
    """`live.stage` with the engine in containers: everything up, Claude Code's prompt on
    screen and the MCP container's tools taken in; every container of the instance removed
    afterwards (by the `appliance` fixture)."""
    user = f"{os.getuid()}:{os.getgid()}"  # tmux serves only its own uid: the Claude user's
    with contextlib.ExitStack() as stack:
        api = stack.enter_context(StandinAPI(live.responder()))
        config_path = root / "kael.toml"
        env = make_claude_env(root / "claude", api.url)
        tui = TmuxClaude(env)
        state_dir = root / "state"
        config = procs.write_config(config_path, {
            "instance": appliance.name, "project_dir": env.project_dir,
            "claude_workdir": env.cwd, "claude_config_dir": env.config_dir,
            "state_dir": state_dir, "activation": "tmux", "tmux_socket": tui.socket,
            "tmux_target": tui.target,
            "resume_command": [str(find_claude_binary()), "--resume", "{session_id}"],
            **config_overrides})
        # What the mounts need before Claude Code and tmux made them (as they would: 0700).
        env.project_dir.mkdir(parents=True, exist_ok=True)
        tmux_socket_dir().mkdir(mode=0o700, exist_ok=True)

        mcp = appliance.mcp_command(config_path, user)
        hook = shlex.join(appliance.hook_command(config_path, state_dir))
        env = make_claude_env(
            root / "claude", api.url, allow=(*DEFAULT_ALLOW, f"mcp__{SERVER_NAME}"),
            mcp_servers={SERVER_NAME: {"type": "stdio", "command": mcp[0], "args": mcp[1:]}},
            settings={"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": hook, "timeout": 10}]}]}})
        appliance.run_daemon(config_path, user)
        engine.wait_for_log(state_dir / "worker.log", "daemon ready")
        stack.enter_context(tui)
        tui.wait_for("❯", timeout=60)
        stage = ContainerStage(root, api, env, tui, config, config_path)
        stage.daemon_name = appliance.daemon_name
        waited = stage.wait_mcp_ready()  # the MCP container: `docker run` is slow under load
        print(f"container drill: the MCP container's tools taken in {waited:.2f} s after the "
              "prompt showed")
        yield stage


def test_the_daemon_container_switches_the_host_pane_and_rolls_back(
        tmp_path: Path, appliance: engine.Instance) -> None:
    with container_stage(tmp_path, appliance) as drill:
        pane_id, old_pid = drill.pane()
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_THINK, live.A_THINK)
        assert drill.tool_listed(live.REQUEST_TOOL), "the MCP container never reached Claude"
        assert [c.status for c in appliance.containers("mcp")] == ["running"]
        old = drill.registry_session()
        assert old is not None
        # Doctor from the appliance, as households run it: every check passes, none is skipped
        # (the workdir, settings.json with the kael-hook wrapper and .claude.json are mounted;
        # the host's Docker engine tells of the one live MCP container and the versions).
        report = appliance.doctor(drill.config_path, f"{os.getuid()}:{os.getgid()}")
        failed = {check["name"]: check["detail"] for check in report["checks"] if not check["ok"]}
        assert report["ok"] and failed == {}, failed
        assert not [c["name"] for c in report["checks"] if c.get("skipped")], report
        checks = {check["name"]: check["detail"] for check in report["checks"]}
        assert "kael-hook --container" in checks["stop_hook"]
        assert checks["mcp_containers"].startswith("1 running for 1 live Claude Code")
        assert f"the daemon {appliance.daemon_name} runs {appliance.image}" in checks["versions"]

        op = steps.rebuild_through_mcp(drill, pane_id, old_pid, old)
        # The old process's MCP container went with it; the new process has its own.
        engine.wait_gone(lambda: len(appliance.containers("mcp")) > 1, timeout=10)
        op = steps.rollback_on_request(drill, op, pane_id, old)

        name = op.operation_id
        assert procs.log_lines(drill.config, "hook.log") == [
            f"hook-stop: operation {name} -> scheduled",
            f"hook-stop: operation {name} -> rollback_scheduled"]
        (daemon,) = appliance.containers("daemon")
        assert daemon.status == "running" and daemon.logs() == b""
        drill.tui.kill()
        # Claude Code has exited: no MCP container may be left behind.
        engine.wait_gone(lambda: appliance.containers("mcp"), MCP_GONE_AFTER_EXIT_SECONDS)
