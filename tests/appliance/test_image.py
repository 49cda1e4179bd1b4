"""The image: labelled, non-root, small, its tmux the host's, its healthcheck honest."""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import docker

from kael_thread_rebuild import __version__

from . import engine
from .household import Household

SIZE_GOAL_BYTES = 150_000_000
HEALTHCHECK = engine.IMAGE_DIR / "healthcheck.py"


def run(dock: docker.DockerClient, image: str, *command: str) -> str:
    out: bytes = dock.containers.run(image, list(command), remove=True, network_mode="none",
                                     read_only=True, cap_drop=["ALL"])
    return out.decode()


def test_the_image_is_labelled_non_root_with_a_healthcheck(
        dock: docker.DockerClient, image: str) -> None:
    attrs = dock.images.get(image).attrs
    labels = attrs["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "kael-thread-rebuild"
    assert labels["org.opencontainers.image.version"] == __version__
    for key in ("source", "revision", "created"):
        assert labels[f"org.opencontainers.image.{key}"], key
    assert labels["io.kael-thread-rebuild.role"] == "appliance"
    assert attrs["Config"]["User"] == "10001:10001"
    assert attrs["Config"]["Entrypoint"] == ["/usr/local/bin/kael-entrypoint"]
    assert attrs["Config"]["Healthcheck"]["Test"] == ["CMD", "kael-healthcheck"]
    assert attrs["Size"] < SIZE_GOAL_BYTES, f"{attrs['Size'] / 1e6:.0f} MB"
    # One flat layer: what the build pruned is really gone.
    assert len(attrs["RootFS"]["Layers"]) == 1


def test_the_entrypoint_runs_every_program_of_the_image(
        dock: docker.DockerClient, image: str) -> None:
    assert run(dock, image, "--version").strip() == f"kael-thread-rebuild {__version__}"
    assert run(dock, image, "kael-thread-rebuild-mcp", "--version").strip() == \
        f"kael-thread-rebuild-mcp {__version__}"
    assert run(dock, image, "kael-thread-rebuild", "--version").strip() == \
        f"kael-thread-rebuild {__version__}"


def test_the_image_tmux_speaks_the_host_servers_version(
        dock: docker.DockerClient, image: str) -> None:
    host = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=True).stdout
    inside = dock.containers.run(image, ["-V"], entrypoint=["tmux"], remove=True,
                                 network_mode="none").decode()
    assert inside.strip() == host.strip()


def load_healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kael_healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_healthcheck_reads_the_lock_from_proc_locks(tmp_path: Path) -> None:
    """/proc/locks lists the locks of the reader's pid namespace: Docker runs the HEALTHCHECK
    inside the daemon's container, where the daemon's lock is visible."""
    lock_is_held = load_healthcheck().lock_is_held
    path = tmp_path / "daemon.lock"
    path.touch()
    with path.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert lock_is_held(path, Path("/proc/locks").read_text()) is True
        fcntl.flock(held, fcntl.LOCK_UN)
    assert lock_is_held(path, Path("/proc/locks").read_text()) is False


def healthcheck_beside(appliance: engine.Instance, household: Household) -> tuple[int, str]:
    """`kael-healthcheck` in a fresh container that sees the household's state dir."""
    mounts = {str(path): {"bind": str(path), "mode": "ro"}
              for path in (household.config_path, household.config.state_dir)}
    container = appliance.dock.containers.run(
        appliance.image, ["kael-healthcheck"], detach=True, user=household.user,
        network_mode="none", read_only=True, cap_drop=["ALL"], volumes=mounts,
        environment={"KAEL_REBUILD_CONFIG": str(household.config_path)},
        labels={f"{engine.LABEL}.instance": appliance.name})
    try:
        code = int(container.wait(timeout=30)["StatusCode"])
        return code, container.logs().decode()
    finally:
        container.remove(force=True)


def test_healthcheck_is_healthy_only_while_the_daemon_serves(
        household: Household, appliance: engine.Instance) -> None:
    daemon = appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    code, output = engine.exec_in(daemon, "kael-healthcheck")
    assert (code, output.split(":")[0]) == (0, "healthy"), output

    daemon.stop(timeout=15)
    code, text = healthcheck_beside(appliance, household)
    assert code == 1 and text.startswith("unhealthy: nobody holds"), text


def test_the_image_runs_the_compiled_engine_and_holds_no_compiler(
        dock: docker.DockerClient, image: str) -> None:
    """mypyc builds the engine's hot modules in the builder stage (image/Containerfile); no C
    compiler reaches the runtime image, and its doctor says which engine runs."""
    python = "/opt/kael/bin/python"
    probe = ("import shutil\n"
             "from kael_thread_rebuild import compiled_modules as c\n"
             "from kael_thread_rebuild.doctor.engine import check_engine\n"
             "check = check_engine(None)  # the check reads no facts\n"
             "print(all(c.is_compiled(m) for m in c.modules()), check.ok, check.warning,\n"
             "      check.detail)\n"
             "print(shutil.which('gcc'), shutil.which('cc'))\n")
    out = dock.containers.run(image, ["-c", probe], entrypoint=[python], remove=True,
                              network_mode="none", read_only=True, cap_drop=["ALL"]).decode()
    engine_line, tools_line = out.split("\n")[:2]
    assert engine_line.startswith("True True False the transcript reader, the classifier and the "
                                  "branch walk run compiled ("), engine_line
    assert tools_line == "None None"
