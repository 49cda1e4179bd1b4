"""Every appliance container carries a memory limit (issue 8, item 6) and a CPU limit (issue 28,
item 3): the daemon, the MCP server, doctor's one-off container and the one that reads the
config, on real containers, inspected and read from inside."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import docker

from tests.switching.sandbox import wait_until

from . import engine
from .household import Household

LIMIT = 2 << 30  # image/lib.sh: KAEL_MEMORY=2g
CPUS = 10**9  # image/lib.sh: KAEL_CPUS=1.0, in Docker's billionths of a CPU
LIMITS = (LIMIT, LIMIT, CPUS)  # and no swap beyond the memory


def limits(container: docker.models.containers.Container) -> tuple[int, int, int]:
    container.reload()
    host = container.attrs["HostConfig"]
    return host["Memory"], host["MemorySwap"], host["NanoCpus"]


def test_the_daemon_container_has_memory_and_cpu_limits(household: Household,
                                                 appliance: engine.Instance) -> None:
    daemon = appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    assert limits(daemon) == LIMITS
    # What the kernel enforces, seen from inside (cgroup v2, else v1).
    code, said = engine.exec_in(daemon, "sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null"
                                " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert (code, said.strip()) == (0, str(LIMIT))
    code, said = engine.exec_in(daemon, "sh", "-c", "cat /sys/fs/cgroup/cpu.max 2>/dev/null"
                                " || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"
                                " /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
    quota, period = said.split()
    assert code == 0 and int(quota) == int(period), said  # one core's time per period


def test_the_mcp_container_has_memory_and_cpu_limits(household: Household,
                                              appliance: engine.Instance) -> None:
    command = appliance.mcp_command(household.config_path, household.user)
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        running = wait_until(lambda: [c for c in appliance.containers("mcp")
                                      if c.status == "running"] or proc.poll() is not None,
                             30, what="the MCP container to run")
        assert running is not True, proc.stderr
        assert limits(running[0]) == LIMITS
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def test_the_doctor_container_has_memory_and_cpu_limits(tmp_path: Path, household: Household,
                                                 appliance: engine.Instance) -> None:
    """run-doctor.sh's container removes itself (--rm): a `docker` first on PATH drops --rm
    from that one command, so that the container can be inspected after doctor ran."""
    real = shutil.which("docker")
    assert real is not None
    kept = f"kael-{appliance.name}-doctor-kept"
    shim = tmp_path / "bin" / "docker"
    shim.parent.mkdir()
    shim.write_text(f"""#!/bin/sh
if [ "$1" = run ] && [ "$2" = --rm ] && [ "$3" = --pid ]; then
  shift 2
  exec {real} run --name {kept} "$@"
fi
exec {real} "$@"
""")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run([str(engine.RUN_DOCTOR), "--config", str(household.config_path),
                           "--user", household.user, "--image", appliance.image, "--", "--json"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.stdout.lstrip().startswith("{"), done.stdout + done.stderr
    container = appliance.dock.containers.get(kept)
    assert container.attrs["Config"]["Labels"][f"{engine.LABEL}.role"] == "doctor"
    assert limits(container) == LIMITS


def test_the_container_reading_the_config_has_memory_and_cpu_limits(
        tmp_path: Path, household: Household, appliance: engine.Instance) -> None:
    """The one-off `kael-mounts` container of every run script lives a second (--rm): a `docker`
    first on PATH writes down the `docker run` commands it passes on."""
    real = shutil.which("docker")
    assert real is not None
    runs = tmp_path / "runs"
    shim = tmp_path / "bin" / "docker"
    shim.parent.mkdir()
    shim.write_text(f"""#!/bin/sh
[ "$1" = run ] && printf '%s\\n' "$*" >> {runs}
exec {real} "$@"
""")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run([str(engine.MCP_COMMAND), "--config", str(household.config_path),
                           "--user", household.user, "--image", appliance.image],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    (reading,) = [line for line in runs.read_text().splitlines() if " kael-mounts " in line]
    assert " --memory 2g --memory-swap 2g --cpus 1.0 " in reading, reading
