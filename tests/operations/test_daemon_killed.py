"""A daemon killed (SIGKILL) in the middle of a switch leaves its operation `activating`, and
nothing settles it until a daemon starts again. Doctor, through the CLI and through the MCP
server's tool, names the daemon that does not run first, and counts the operation as stuck at
once instead of after ten minutes. (The same across containers: tests/appliance.)"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from kael_thread_rebuild.config import Config
from tests.builder import SESSION
from tests.drill import procs
from tests.test_mcp_server import call, with_session, write_config

#: The switch's health window: the daemon is `activating` for this long, the kill falls in it.
WINDOW_SECONDS = 60.0


def _failing(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [check for check in report["checks"] if not check["ok"]]


def _cli_doctor(config_path: Path) -> dict[str, Any]:
    done = procs.run_cli(config_path, "doctor", "--json")
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if report["ok"] else 1), done.stderr
    return report


def _mcp_doctor(config_path: Path) -> dict[str, Any]:
    async def body(session: ClientSession) -> dict[str, Any]:
        result = await call(session, "thread_rebuild_doctor")
        assert result.structured_content is not None
        return result.structured_content
    return with_session(config_path, body)


def test_doctor_names_a_killed_daemon_first(config: Config, source: Path,
                                            tmp_path: Path) -> None:
    config = config.model_copy(update={"health_window_seconds": WINDOW_SECONDS,
                                       "health_timeout_seconds": WINDOW_SECONDS})
    config_path = write_config(config, tmp_path / "kael.toml")
    daemon = procs.start_daemon(config_path, tmp_path / "daemon.err")
    try:
        (serving,) = [c for c in _cli_doctor(config_path)["checks"] if c["name"] == "daemon"]
        assert serving["ok"] and not serving["warning"], serving
        assert serving["detail"] == f"a daemon serves {config.state_dir} (it holds daemon.lock)"

        assert procs.run_cli(config_path, "request", "--reason", "killed daemon", "--confirm",
                             "REBUILD").returncode == 0
        stop = {"session_id": SESSION, "transcript_path": str(source), "cwd": str(tmp_path),
                "hook_event_name": "Stop", "stop_hook_active": False}
        hook = procs.run_cli(config_path, "hook-stop", stdin=json.dumps(stop).encode())
        assert hook.returncode == 0, hook.stderr
        op = procs.wait_for_status(config, ["activating"], timeout=60)
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(15)

    for where, report in (("CLI", _cli_doctor(config_path)),
                          ("MCP tool", _mcp_doctor(config_path))):
        failing = _failing(report)
        print(f"{where}: " + " | ".join(f"FAIL {c['name']}: {c['detail']}" for c in failing))
        assert not report["ok"] and failing[0]["name"] == "daemon", (where, failing)
        detail = failing[0]["detail"]
        assert detail.startswith(f"no daemon serves {config.state_dir}: nobody holds "
                                 f"{config.state_dir / 'daemon.lock'}; operation "
                                 f"{op.operation_id} was left activating "), detail
        assert detail.endswith(" ago and nothing drives it, so every request is refused until "
                               "it is settled"), detail
        assert f"`docker start kael-thread-rebuild-{config.instance}`" in failing[0]["fix"]
        (operations,) = [c for c in failing if c["name"] == "operations"]
        assert operations["detail"].startswith(f"{op.operation_id} has been activating for ")
        assert "no daemon serves the state dir" in operations["detail"]
        assert "recover" in operations["fix"]
