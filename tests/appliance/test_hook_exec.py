"""The Stop hook and the CLI through `docker exec` into the daemon container: a Stop is recorded
and the daemon switches the pointer; with the daemon down the hook still exits 0 quietly and
leaves the reason where doctor reads it; plan, dirty and status answer through exec."""

from __future__ import annotations

import stat
import subprocess
import time

import orjson

from kael_thread_rebuild.plan import build_plan
from tests.drill import procs

from . import engine
from .household import Household


def test_plan_dirty_and_status_through_docker_exec(
        household: Household, appliance: engine.Instance) -> None:
    appliance.run_daemon(household.config_path, household.user)
    engine.wait_for_log(household.config.state_dir / "worker.log", "daemon ready")

    code, out = appliance.exec_cli("plan", "--json")
    assert code == 0, out
    expected = build_plan(household.config, household.transcript).report
    assert orjson.loads(out) == expected.model_dump(mode="json")  # same paths on both sides
    code, out = appliance.exec_cli("dirty", "--json")
    assert code == 0 and orjson.loads(out) == expected.dirty.model_dump(mode="json"), out
    code, out = appliance.exec_cli("status")
    assert (code, out) == (0, "no operation yet\n")
    code, out = appliance.exec_cli("plan", "--transcript", "/etc/hostname")
    assert code != 0 and "outside project_dir" in out, out


def test_a_stop_through_the_hook_wrapper_is_recorded_and_switched(
        household: Household, appliance: engine.Instance) -> None:
    appliance.run_daemon(household.config_path, household.user)
    state = household.config.state_dir
    engine.wait_for_log(state / "worker.log", "daemon ready")
    code, out = appliance.exec_cli("request", "--reason", "appliance test", "--confirm",
                                   "REBUILD")
    assert code == 0, out

    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)
    started = time.monotonic()
    done = engine.run_hook(appliance.hook_command(household.config_path, state), stop)
    took = time.monotonic() - started

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert took < 5, took
    op = appliance.settled_operation()
    assert op.status.value == "activated", op.error
    assert op.new_session_id is not None
    assert household.pointer.read_text().strip() == op.new_session_id
    assert procs.log_lines(household.config, "hook.log") == [
        f"hook-stop: operation {op.operation_id} -> scheduled"]
    # What the container wrote belongs to the Claude user; the new files are private, the
    # pointer keeps the mode of the file it replaced.
    for path in (household.pointer, household.config.project_dir / f"{op.new_session_id}.jsonl",
                 state / "hook.log"):
        info = path.stat()
        assert (info.st_uid, info.st_gid) == (engine.TEST_UID, engine.TEST_GID), path
        private = 0o644 if path == household.pointer else 0o600
        assert stat.S_IMODE(info.st_mode) == private, path
    assert household.transcript.read_bytes() == household.original


def test_with_the_daemon_down_the_hook_exits_0_quietly(
        household: Household, appliance: engine.Instance) -> None:
    daemon = appliance.run_daemon(household.config_path, household.user)
    state = household.config.state_dir
    engine.wait_for_log(state / "worker.log", "daemon ready")
    daemon.stop(timeout=15)
    stop = engine.stop_json(household.transcript.stem, household.transcript, household.root)

    started = time.monotonic()
    done = engine.run_hook(appliance.hook_command(household.config_path, state), stop)
    took = time.monotonic() - started

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert took < 2, took
    (line,) = procs.log_lines(household.config, "hook.log")
    assert line.startswith(f"hook-wrapper: docker exec into {appliance.daemon_name} failed")
    assert "is not running" in line and line.endswith("the Stop was not recorded")
    # No container at all, and garbage arguments: still exit 0 with nothing on stdout.
    nowhere = appliance.hook_command(household.config_path, state)
    nowhere[2] = f"kael-{appliance.name}-nowhere"
    for command in (nowhere, [str(engine.KAEL_HOOK)]):
        done = subprocess.run(command, input=stop, capture_output=True, timeout=15, check=False)
        assert (done.returncode, done.stdout) == (0, b""), command
    assert "No such container" in procs.log_lines(household.config, "hook.log")[1]
