"""The appliance as households run it: the image, the run scripts of `image/`, containers found by
their labels, and the hardening every container must have.

Every container a test starts carries a unique instance label (`test-DO-NOT-CREATE-<tag>`), so
teardown removes exactly the test's own containers, also after a failure.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import orjson
from docker.models.containers import Container

from kael_thread_rebuild.operations.model import Operation
from tests.drill.procs import SETTLED
from tests.guard import MARK
from tests.switching.sandbox import wait_until

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = REPO / "image"
RUN_DAEMON = IMAGE_DIR / "run-daemon.sh"
MCP_COMMAND = IMAGE_DIR / "mcp-command.sh"
RUN_DOCTOR = IMAGE_DIR / "run-doctor.sh"
KAEL_HOOK = IMAGE_DIR / "kael-hook"
BUILD = IMAGE_DIR / "build.sh"
IMAGE_NAME = "kael-thread-rebuild"
LABEL = "io.kael-thread-rebuild"
#: The Claude user of the tests that need no tmux server: any uid but root's proves `--user`.
TEST_UID = 4242 if os.geteuid() == 0 else os.getuid()
TEST_GID = 4242 if os.geteuid() == 0 else os.getgid()


def engine_problem() -> str | None:
    """Why no Docker engine can be used from here, or None when one answers."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH (install and start an engine with .ci/docker-up)"
    try:
        docker.from_env(timeout=10).ping()
    except docker.errors.DockerException as exc:
        return f"no Docker engine reachable ({exc}); start one with .ci/docker-up"
    return None


def client() -> docker.DockerClient:
    return docker.from_env(timeout=60)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def current_revision() -> str:
    revision = _git("rev-parse", "HEAD") or "unknown"
    return f"{revision}-dirty" if _git("status", "--porcelain") else revision


def ensure_image(dock: docker.DockerClient) -> str:
    """The appliance image for this checkout: `$KAEL_APPLIANCE_IMAGE` when set, else
    `kael-thread-rebuild:latest`, (re)built with image/build.sh unless it was built from this
    very commit of a clean tree (CI builds it first with .ci/docker-up)."""
    given = os.environ.get("KAEL_APPLIANCE_IMAGE")
    if given:
        return given
    tag = f"{IMAGE_NAME}:latest"
    revision = current_revision()
    with contextlib.suppress(docker.errors.ImageNotFound):
        labels = dock.images.get(tag).labels
        if not revision.endswith("-dirty") and labels.get(
                "org.opencontainers.image.revision") == revision:
            return tag
    done = subprocess.run([str(BUILD)], cwd=REPO, capture_output=True, text=True,
                          timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"image/build.sh failed:\n{done.stdout}\n{done.stderr}")
    return tag


# -- containers ----------------------------------------------------------------------------------


@dataclass
class Instance:
    """One test's appliance instance: its unique name, its containers, cleaned up at the end."""

    dock: docker.DockerClient
    image: str
    name: str = field(default_factory=lambda: f"test-{MARK}-{uuid.uuid4().hex[:8]}")

    @property
    def daemon_name(self) -> str:
        return f"kael-{self.name}-daemon"

    def containers(self, role: str | None = None) -> list[Container]:
        filters = [f"{LABEL}.instance={self.name}"]
        if role is not None:
            filters.append(f"{LABEL}.role={role}")
        # sparse: one list call, no inspect per container (which races with --rm removals)
        found: list[Container] = self.dock.containers.list(all=True, sparse=True,
                                                           filters={"label": filters})
        return found

    def remove_all(self) -> None:
        for container in self.containers():
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:  # 409: an --rm removal already under way
                if exc.status_code != 409:
                    raise

    def run_daemon(self, config_path: Path, user: str) -> Container:
        done = subprocess.run([str(RUN_DAEMON), "--config", str(config_path), "--user", user,
                               "--name", self.daemon_name, "--image", self.image],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"run-daemon.sh failed: {done.stdout}{done.stderr}")
        container: Container = self.dock.containers.get(self.daemon_name)
        return container

    def mcp_command(self, config_path: Path, user: str) -> list[str]:
        done = subprocess.run([str(MCP_COMMAND), "--config", str(config_path), "--user", user,
                               "--image", self.image],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"mcp-command.sh failed: {done.stderr}")
        return done.stdout.splitlines()

    def doctor(self, config_path: Path, user: str, image: str | None = None) -> dict[str, Any]:
        """`image/run-doctor.sh --json` (IMAGE: the installed image; default this instance's):
        doctor's report, from a one-off container; its exit status agrees with the report."""
        done = subprocess.run([str(RUN_DOCTOR), "--config", str(config_path), "--user", user,
                               "--image", image or self.image, "--", "--json"],
                              capture_output=True, text=True, timeout=120, check=False)
        try:
            report: dict[str, Any] = orjson.loads(done.stdout)
        except orjson.JSONDecodeError:
            raise RuntimeError(f"run-doctor.sh gave no report (exit {done.returncode}): "
                               f"{done.stdout}{done.stderr}") from None
        assert (done.returncode == 0) == report["ok"], (done.returncode, report)
        return report

    def hook_command(self, config_path: Path, state_dir: Path) -> list[str]:
        return [str(KAEL_HOOK), "--container", self.daemon_name, "--config", str(config_path),
                "--state-dir", str(state_dir)]

    def exec_cli(self, *args: str) -> tuple[int, str]:
        """`docker exec <daemon> kael-thread-rebuild ARGS` (the container's environment names
        the config): exit code and stdout+stderr."""
        return exec_in(self.dock.containers.get(self.daemon_name), "kael-thread-rebuild", *args)

    def settled_operation(self, timeout: float = 60) -> Operation:
        """The latest operation once settled, read by the engine in the daemon container (the
        state dir is the Claude user's: the engine refuses it to any other user, the test
        process included)."""
        def probe() -> Operation | None:
            code, out = self.exec_cli("status", "--json")
            assert code == 0, out
            data = orjson.loads(out)["operation"]
            op = None if data is None else Operation.model_validate(data)
            return op if op is not None and op.status.value in SETTLED else None
        return wait_until(probe, timeout, what="the operation to settle")


def exec_in(container: Container, *command: str) -> tuple[int, str]:
    """`docker exec CONTAINER COMMAND`: exit code and stdout+stderr."""
    code, output = container.exec_run(list(command))
    assert isinstance(code, int) and isinstance(output, bytes)
    return code, output.decode()


@contextlib.contextmanager
def instance(dock: docker.DockerClient, image: str) -> Iterator[Instance]:
    made = Instance(dock, image)
    try:
        yield made
    finally:
        made.remove_all()


def wait_for_log(path: Path, prefix: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(line.partition(" ")[2].startswith(prefix)
                                 for line in path.read_text().splitlines()):
            return
        time.sleep(0.1)
    shown = path.read_text() if path.exists() else "(missing)"
    raise TimeoutError(f"no line starting {prefix!r} in {path} after {timeout:g} s:\n{shown}")


class ContainerEvents:
    """The Docker engine's own events of one instance's containers (`docker events`), read in a
    thread from the moment of entering: when a container's process ended (`die`, with its exit
    code) and when the engine removed it (`destroy`), stamped by the engine, not by a poller
    that a loaded machine delays."""

    def __init__(self, instance: Instance) -> None:
        self._stream = instance.dock.events(
            decode=True, since=int(time.time()) - 1,
            filters={"type": "container", "label": f"{LABEL}.instance={instance.name}"})
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self._seen: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._pump, daemon=True)

    def _pump(self) -> None:
        with contextlib.suppress(Exception):  # the stream ends with an error when closed
            for event in self._stream:
                self._queue.put(event)

    def __enter__(self) -> ContainerEvents:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()

    def wait(self, action: str, timeout: float, after: float = 0.0) -> dict[str, Any]:
        """The first ACTION event stamped at or after AFTER (epoch seconds); TimeoutError when
        none came within TIMEOUT seconds of waiting (a bound for the test, not the promise)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self._seen:
                if event.get("Action") == action and stamp(event) >= after:
                    return event
            try:
                self._seen.append(self._queue.get(timeout=max(0.0,
                                                                deadline - time.monotonic())))
            except queue.Empty:
                raise TimeoutError(f"no {action!r} event within {timeout:g} s; the engine said: "
                                   f"{[(e.get('Action'), stamp(e)) for e in self._seen]}") \
                    from None


def stamp(event: dict[str, Any]) -> float:
    """An engine event's time, epoch seconds."""
    return float(event["timeNano"]) / 1e9


def wait_gone(find: Any, timeout: float) -> float:
    """Seconds until FIND() returns nothing; raises TimeoutError after TIMEOUT."""
    started = time.monotonic()
    while find():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"still there after {timeout:g} s: {find()}")
        time.sleep(0.05)
    return time.monotonic() - started


# -- hardening -----------------------------------------------------------------------------------


def hardening_problems(attrs: dict[str, Any], user: str) -> list[str]:
    """What is off in a container's `docker inspect` against appliance.md "Identity and
    hardening"; empty when everything holds."""
    config, host = attrs["Config"], attrs["HostConfig"]
    problems = []
    if config.get("User") != user:
        problems.append(f"runs as {config.get('User')!r}, not the Claude user {user!r}")
    if host.get("ReadonlyRootfs") is not True:
        problems.append("root filesystem is writable (no --read-only)")
    if [cap.upper().removeprefix("CAP_") for cap in host.get("CapDrop") or []] != ["ALL"]:
        problems.append(f"capabilities not all dropped: CapDrop={host.get('CapDrop')}")
    if host.get("CapAdd"):
        problems.append(f"capabilities added: {host.get('CapAdd')}")
    if host.get("Privileged"):
        problems.append("privileged")
    if host.get("NetworkMode") != "none":
        problems.append(f"network mode {host.get('NetworkMode')!r}, not 'none'")
    if "no-new-privileges" not in (host.get("SecurityOpt") or []) and \
            "no-new-privileges:true" not in (host.get("SecurityOpt") or []):
        problems.append(f"no no-new-privileges: SecurityOpt={host.get('SecurityOpt')}")
    if "/tmp" not in (host.get("Tmpfs") or {}):
        problems.append("no tmpfs on /tmp")
    if not host.get("NanoCpus"):
        problems.append("no CPU limit (--cpus)")
    for mount in attrs.get("Mounts") or []:
        if mount.get("Type") != "bind":
            problems.append(f"{mount.get('Type')} mount at {mount.get('Destination')}")
        elif mount["Source"] != mount["Destination"]:
            problems.append(f"{mount['Source']} is mounted at another path "
                            f"({mount['Destination']})")
        if "docker.sock" in mount.get("Source", ""):
            problems.append(f"the Docker socket is mounted ({mount['Source']})")
    if host.get("PidMode") or host.get("IpcMode") == "host" or host.get("UsernsMode"):
        problems.append("shares a host namespace")
    return problems


def stop_json(session_id: str, transcript: Path, cwd: Path) -> bytes:
    """A Stop hook input as Claude Code sends it."""
    return orjson.dumps({"session_id": session_id, "transcript_path": str(transcript),
                         "cwd": str(cwd), "permission_mode": "default",
                         "hook_event_name": "Stop", "stop_hook_active": False})


def run_hook(command: Sequence[str], stdin: bytes,
             timeout: float = 15) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(command), input=stdin, capture_output=True, timeout=timeout,
                          check=False)
