"""Doctor's checks that need the host's Docker engine, through `image/run-doctor.sh` (which asks
the engine and hands the answers to doctor in its one-off container): orphaned MCP server
containers, image and daemon versions, and whether the Stop hook reaches the daemon."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from docker.models.images import Image

from kael_thread_rebuild import __version__
from kael_thread_rebuild.doctor.host import VERSION_LABEL
from tests.drill import procs

from . import engine
from .household import Household


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def wait_serving(appliance: engine.Instance, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while appliance.exec_cli("status")[0] != 0:
        assert time.monotonic() < deadline, "the daemon did not answer"
        time.sleep(0.2)


def test_orphaned_mcp_containers_are_found(
        dock: docker.DockerClient, household: Household, appliance: engine.Instance) -> None:
    appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    report = appliance.doctor(household.config_path, household.user)
    assert checks(report)["mcp_containers"]["ok"], report
    assert not checks(report)["mcp_containers"]["skipped"]

    labels = {f"{engine.LABEL}.role": "mcp", f"{engine.LABEL}.instance": appliance.name}
    hardened: dict[str, Any] = {"network_mode": "none", "user": household.user,
                                "read_only": True, "cap_drop": ["ALL"]}
    exited = dock.containers.run(appliance.image, ["--version"], labels=labels, detach=True,
                                 name=f"kael-{appliance.name}-mcp-exited", **hardened)
    exited.wait(timeout=30)
    running = dock.containers.run(appliance.image, ["600"], entrypoint=["sleep"], labels=labels,
                                  detach=True, name=f"kael-{appliance.name}-mcp-running",
                                  **hardened)
    report = appliance.doctor(household.config_path, household.user)
    check = checks(report)["mcp_containers"]
    assert not report["ok"] and not check["ok"]
    assert f"1 not running: {exited.name} (Exited (0)" in check["detail"]
    # No Claude Code runs in this household: the running one is left over too.
    assert "1 running for 0 live Claude Code process(es)" in check["detail"]
    assert running.name in check["detail"]
    assert exited.name in check["fix"] and running.name in check["fix"]
    assert checks(report)["versions"]["ok"]  # the other appliance check is unaffected


@pytest.fixture
def relabelled(dock: docker.DockerClient, appliance: engine.Instance) -> Iterator[Image]:
    """The appliance image again, labelled as another version: an upgrade the daemon has not
    been restarted onto."""
    made = dock.containers.create(appliance.image, ["--version"],
                                  labels={f"{engine.LABEL}.instance": appliance.name})
    try:
        image = made.commit(repository="kael-test-do-not-create", tag=appliance.name,
                            changes=[f"LABEL {VERSION_LABEL}=0.0.0-upgrade"])
    finally:
        made.remove(force=True)
    try:
        yield image
    finally:
        dock.images.remove(image.id, force=True)


def test_a_version_mismatch_is_reported(
        household: Household, appliance: engine.Instance, relabelled: Image) -> None:
    appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")
    check = checks(appliance.doctor(household.config_path, household.user))["versions"]
    assert check["ok"] and not check["skipped"], check
    assert f"engine {__version__}" in check["detail"]

    report = appliance.doctor(household.config_path, household.user, image=relabelled.id)
    check = checks(report)["versions"]
    assert not report["ok"] and not check["ok"]
    assert f"the daemon {appliance.daemon_name} runs version {__version__} " in check["detail"]
    assert f"but {relabelled.id} is 0.0.0-upgrade" in check["detail"]
    assert check["fix"].startswith("restart the daemon on the installed image")


def test_a_stop_that_did_not_reach_the_daemon_is_reported_until_one_does(
        household: Household, appliance: engine.Instance) -> None:
    daemon = appliance.run_daemon(household.config_path, household.user)
    state = household.config.state_dir
    engine.wait_for_log(state / "worker.log", "daemon ready")
    hook = appliance.hook_command(household.config_path, state)
    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)
    # Claude Code runs the hook as the Claude user, whose hook.log it is; this test runs it as
    # the user that may reach the Docker socket, so the log is given its real owner first.
    log = state / "hook.log"
    log.touch(mode=0o600)
    os.chown(log, engine.TEST_UID, engine.TEST_GID)
    daemon.stop(timeout=15)
    assert engine.run_hook(hook, stop).returncode == 0

    report = appliance.doctor(household.config_path, household.user)
    check = checks(report)["hook_delivery"]
    assert not check["ok"] and "the last Stop did not reach the engine" in check["detail"]
    assert f"docker exec into {appliance.daemon_name} failed" in check["detail"]
    assert check["fix"].startswith(f"start the daemon container (docker start "
                                   f"{appliance.daemon_name}")
    versions = checks(report)["versions"]
    assert not versions["ok"] and "is exited" in versions["detail"]

    daemon.start()
    wait_serving(appliance)
    done = engine.run_hook(hook, stop)  # nothing waits: hook-stop itself logs nothing
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    *_, last = procs.log_lines(household.config, "hook.log")
    assert last == f"hook-wrapper: reached {appliance.daemon_name} again (a Stop logged above " \
                   "as not recorded was lost)"
    report = appliance.doctor(household.config_path, household.user)
    assert checks(report)["hook_delivery"]["ok"] and checks(report)["versions"]["ok"], report
    engine.run_hook(hook, stop)  # the next clean Stop adds nothing
    assert procs.log_lines(household.config, "hook.log")[-1] == last
    assert len(procs.log_lines(household.config, "hook.log")) == 2
