"""Hardening is real: the running daemon and MCP containers, inspected, and proven from inside."""

from __future__ import annotations

import subprocess
import time

import docker
import pytest

from . import engine
from .household import Household


def test_the_check_itself_catches_a_weak_container(
        dock: docker.DockerClient, appliance: engine.Instance) -> None:
    weak = dock.containers.run(appliance.image, ["600"], entrypoint=["sleep"], detach=True,
                               labels={f"{engine.LABEL}.instance": appliance.name})
    weak.reload()
    problems = engine.hardening_problems(weak.attrs, "4242:4242")
    assert len(problems) >= 5, problems


def test_the_daemon_container_is_hardened_inside_and_out(
        household: Household, appliance: engine.Instance) -> None:
    daemon = appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    daemon.reload()

    assert engine.hardening_problems(daemon.attrs, household.user) == []
    host = daemon.attrs["HostConfig"]
    assert host["RestartPolicy"]["Name"] == "unless-stopped"
    assert host["Init"] is True
    labels = daemon.attrs["Config"]["Labels"]
    assert labels[f"{engine.LABEL}.role"] == "daemon"
    assert labels[f"{engine.LABEL}.instance"] == household.config.instance
    mounted = {m["Destination"]: m["RW"] for m in daemon.attrs["Mounts"]}
    assert mounted == {
        str(household.config.project_dir): True, str(household.config.state_dir): True,
        str(household.config_path): False, str(household.pointer.parent): True}

    def inside(*command: str) -> tuple[int, str]:
        return engine.exec_in(daemon, *command)

    assert inside("id", "-u") == (0, f"{engine.TEST_UID}\n")
    code, out = inside("touch", "/opt/kael/written")
    assert code != 0 and "Read-only file system" in out
    status = inside("cat", "/proc/1/status")[1] + inside("cat", "/proc/self/status")[1]
    assert status.count("CapEff:\t0000000000000000") == 2
    assert status.count("NoNewPrivs:\t1") == 2
    interfaces = [line.split(":")[0].strip()
                  for line in inside("cat", "/proc/net/dev")[1].splitlines()[2:]]
    assert interfaces == ["lo"]
    assert inside("touch", "/tmp/scratch")[0] == 0


def test_the_mcp_container_is_hardened(household: Household, appliance: engine.Instance) -> None:
    command = appliance.mcp_command(household.config_path, household.user)
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (found := appliance.containers("mcp")) or found[0].status != "running":
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"no running MCP container: {proc.poll()} {found}")
            time.sleep(0.1)
        (container,) = found
        container.reload()
        assert engine.hardening_problems(container.attrs, household.user) == []
        assert container.attrs["HostConfig"]["AutoRemove"] is True
        assert container.attrs["HostConfig"]["Init"] is True
        assert container.attrs["Config"]["OpenStdin"] is True
        assert container.attrs["Config"]["StdinOnce"] is True
        assert container.attrs["Config"]["Labels"][f"{engine.LABEL}.role"] == "mcp"
        # It only reads: the project dir read-only, no pointer dir (issue 8, item 8).
        config = household.config
        mounted = {m["Destination"]: m["RW"] for m in container.attrs["Mounts"]}
        assert mounted == {str(config.project_dir): False, str(config.state_dir): True,
                           str(household.config_path): False}
        code, out = engine.exec_in(container, "touch", str(config.project_dir / "written"))
        assert code != 0 and "Read-only file system" in out
        code, out = engine.exec_in(container, "ls", str(household.pointer.parent))
        assert code != 0 and "No such file or directory" in out
        assert engine.exec_in(container, "touch", str(config.state_dir / "scratch"))[0] == 0
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
