"""The engine as its users run it: a TOML config on disk, the console scripts as subprocesses,
the daemon as its own process, tmux addressed on a private socket only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from kael_thread_rebuild.config import Config, load_config, parse_config
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import Operation
from tests.guard import MARK, assert_safe_target
from tests.switching.sandbox import wait_until

VENV_BIN = Path(sys.prefix) / "bin"
CLI = VENV_BIN / "kael-thread-rebuild"
MCP = VENV_BIN / "kael-thread-rebuild-mcp"
SETTLED = ("activated", "cancelled", "failed", "rolled_back")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return orjson.dumps(str(value)).decode()  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return str(value)


def write_config(path: Path, data: dict[str, Any]) -> Config:
    """Write DATA as an instance's TOML config, once the guard accepted it."""
    config = parse_config({key: str(v) if isinstance(v, Path) else v for key, v in data.items()})
    assert_safe_target(config)
    path.write_text("".join(f"{key} = {toml_value(value)}\n" for key, value in data.items()))
    return config


def cli_env() -> dict[str, str]:
    """This environment without tmux's own variables: the config alone names the server."""
    return {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}


def run_cli(config_path: Path, *args: str, stdin: bytes = b"",
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(CLI), "--config", str(config_path), *args], input=stdin,
                          capture_output=True, timeout=timeout, env=cli_env(), check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def start_daemon(config_path: Path, stderr: Path,
                 timeout: float = 30) -> subprocess.Popen[bytes]:
    """`kael-thread-rebuild serve` in its own session, as a service manager would start it;
    returns once it has recovered and polls (its start settles every unsettled operation, so
    a request made before that would be failed)."""
    with stderr.open("ab") as err:
        proc = subprocess.Popen([str(CLI), "--config", str(config_path), "serve"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=cli_env(), start_new_session=True)
    config = load_config(config_path)
    ready = f"daemon ready (pid {proc.pid})"
    try:
        wait_until(lambda: proc.poll() is not None or any(
            line.startswith(ready) for line in log_lines(config, "worker.log")),
            timeout, what="the daemon to be ready")
    except BaseException:
        stop_process(proc)
        raise
    if proc.poll() is not None:
        raise RuntimeError(f"the daemon exited with status {proc.returncode}: "
                           f"{stderr.read_text()[-2000:]}")
    return proc


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15) -> int:
    """SIGTERM, then SIGKILL after TIMEOUT seconds; returns the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@contextlib.contextmanager
def daemon(config_path: Path, stderr: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_daemon(config_path, stderr)
    try:
        yield proc
    finally:
        stop_process(proc)


def tmux(socket: str, *args: str) -> str:
    """A tmux client command on the private server SOCKET (targets must be test panes)."""
    if "-t" in args and MARK not in args[args.index("-t") + 1]:
        raise ValueError(f"refusing to address tmux target {args[args.index('-t') + 1]!r}")
    out = subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                         timeout=10, env=cli_env(), check=True)
    return out.stdout.strip()


def pane(socket: str, target: str) -> tuple[str, int]:
    """(pane id, pane pid) as tmux itself reports them."""
    pane_id, pid = tmux(socket, "display-message", "-p", "-t", target,
                        "#{pane_id} #{pane_pid}").split()
    return pane_id, int(pid)


def latest(config: Config) -> Operation | None:
    ops = service.history(config)
    return ops[-1] if ops else None


def wait_for_status(config: Config, statuses: Sequence[str], timeout: float) -> Operation:
    """The latest operation, once it is in one of STATUSES."""
    def probe() -> Operation | None:
        op = latest(config)
        return op if op is not None and op.status.value in statuses else None
    return wait_until(probe, timeout, what=f"an operation to be {' or '.join(statuses)}")


def log_lines(config: Config, name: str) -> list[str]:
    """The messages of `<state_dir>/NAME`, without their time stamps."""
    path = config.state_dir / name
    if not path.exists():
        return []
    return [line.partition(" ")[2] for line in path.read_text().splitlines()]
