"""The operation commands through the real command line, over a real pointer base, with the
daemon as its own process; and `serve` itself (recovery, stopping, one daemon per state dir)."""

from __future__ import annotations

import signal
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.daemon import DaemonBusy, serve
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from tests.builder import SESSION
from tests.drill import procs
from tests.guard import MARK, TEST_SOCKET_PREFIX
from tests.operations.harness import turn_ended, write_source
from tests.switching.sandbox import wait_until

S = OperationStatus
FAST = {"stability_interval_seconds": 0.02, "stability_timeout_seconds": 5.0,
        "health_window_seconds": 0.1, "health_timeout_seconds": 1.0,
        "poll_interval_seconds": 0.02}


@dataclass
class Instance:
    root: Path
    config: Config
    config_path: Path
    source: Path
    pointer: Path

    def cli(self, *args: str, stdin: bytes = b"") -> Any:
        return procs.run_cli(self.config_path, *args, stdin=stdin)

    def cli_json(self, *args: str, stdin: bytes = b"") -> dict[str, Any]:
        done = self.cli(*args, "--json", stdin=stdin)
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = orjson.loads(done.stdout)
        return data

    def stop_json(self, session: str = SESSION) -> bytes:
        path = self.config.project_dir / f"{session}.jsonl"
        return orjson.dumps({"session_id": session, "transcript_path": str(path),
                             "cwd": "/home/user/project", "hook_event_name": "Stop",
                             "stop_hook_active": False})

    def daemon(self) -> Any:
        return procs.daemon(self.config_path, self.root / "daemon.stderr")


def make_instance(root: Path, **overrides: Any) -> Instance:
    root.mkdir(parents=True, exist_ok=True)
    pointer = root / "runner" / "session"
    pointer.parent.mkdir()
    pointer.write_text(SESSION + "\n")
    project = root / "project"
    project.mkdir()
    config_path = root / "kael.toml"
    config = procs.write_config(config_path, {
        "project_dir": project, "state_dir": root / "state", "activation": "pointer",
        "resume_pointer_path": pointer, "tmux_target": f"{MARK}-unused:0.0",
        "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-unused", **FAST, **overrides})
    return Instance(root, config, config_path, write_source(config), pointer)


@pytest.fixture
def inst(tmp_path: Path) -> Instance:
    return make_instance(tmp_path / "instance")


def test_wrong_or_missing_confirmation_words_are_refused_by_name(inst: Instance) -> None:
    some_id = "20261130T000000Z-0123abcd"
    for args, action, word in [
            (("request", "--reason", "r", "--confirm", "rebuild"), "request a rebuild", "REBUILD"),
            (("cancel", "--operation", some_id, "--confirm", "YES"), "cancel an operation",
             "CANCEL"),
            (("rollback", "--operation", some_id, "--confirm", "REBUILD"),
             "roll back an operation", "ROLLBACK")]:
        done = inst.cli(*args)
        assert (done.returncode, done.stdout) == (1, ""), args
        assert done.stderr == (f"kael-thread-rebuild: to {action}, the confirmation must be "
                               f"exactly {word}\n")
    missing = inst.cli("request", "--reason", "r")
    assert missing.returncode == 2 and "--confirm" in missing.stderr
    assert service.history(inst.config) == []


def test_request_stop_switch_and_rollback_through_the_command_line(inst: Instance) -> None:
    with inst.daemon() as daemon:
        asked = inst.cli("request", "--reason", "the human asked", "--confirm", "REBUILD")
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.startswith("rebuild requested; it runs after the current reply")
        name = asked.stdout.splitlines()[1].split()[1].rstrip(":")
        status = inst.cli_json("status")["operation"]
        assert (status["operation_id"], status["status"]) == (name, "pending")
        again = inst.cli_json("request", "--reason", "twice", "--confirm", "REBUILD")
        assert again["joined_existing"] is True and again["operation"]["operation_id"] == name

        hook = inst.cli("hook-stop", stdin=inst.stop_json())
        assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
        waited = inst.cli("wait", "--operation", name, "--timeout", "30")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert waited.stdout.startswith(f"operation {name}: activated\n")
        op = service.status(inst.config, name)
        assert op is not None and op.new_session_id is not None
        assert inst.pointer.read_text() == f"{op.new_session_id}\n"

        history = inst.cli("history")
        assert history.returncode == 0
        assert history.stdout.split()[:3] == [name, "activated", "rebuild"]

        back = inst.cli_json("rollback", "--operation", name, "--confirm", "ROLLBACK")
        assert back["operation"]["status"] == "rollback_pending"
        turn_ended(inst.config, op.new_session_id)  # the Stop ends a turn of the new session
        hook = inst.cli("hook-stop", stdin=inst.stop_json(op.new_session_id))
        assert (hook.returncode, hook.stdout) == (0, "")
        waited = inst.cli("wait", "--operation", name, "--timeout", "30", "--json")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        final = orjson.loads(waited.stdout)
        assert final["timed_out"] is False and final["operation"]["status"] == "rolled_back"
        assert inst.pointer.read_text() == f"{SESSION}\n"
        assert procs.log_lines(inst.config, "hook.log") == [
            f"hook-stop: operation {name} -> scheduled",
            f"hook-stop: operation {name} -> rollback_scheduled"]

        assert procs.stop_process(daemon) == 0
    worker = procs.log_lines(inst.config, "worker.log")
    assert [line for line in worker if line.startswith(f"operation {name}")] == [
        f"operation {name}: scheduled -> running (worker started)",
        f"operation {name}: running -> verifying (candidate written)",
        f"operation {name}: verifying -> activating (checks passed)",
        f"operation {name}: activating -> activated (the new session is healthy)",
        f"operation {name}: rollback_scheduled -> rolled_back (rolled back on request)"]
    assert worker[-1] == "daemon stopped"
    assert (inst.root / "daemon.stderr").read_text() == ""


def test_cancel_status_and_wait_with_nothing_in_flight(inst: Instance) -> None:
    assert inst.cli("status").stdout == "no operation yet\n"
    assert inst.cli_json("status") == {"operation": None, "skipped": []}
    assert inst.cli("history").stdout == "no operation yet\n"
    name = inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")["operation"][
        "operation_id"]
    done = inst.cli("cancel", "--operation", name, "--confirm", "CANCEL")
    assert done.returncode == 0
    assert done.stdout.startswith(f"cancelled; nothing will be switched\noperation {name}: "
                                  "cancelled\n")
    again = inst.cli("cancel", "--operation", name, "--confirm", "CANCEL")
    assert again.returncode == 1 and "is cancelled" in again.stderr
    waited = inst.cli("wait", "--timeout", "5")
    assert (waited.returncode, waited.stdout) == (0, "no operation in flight\n")
    unknown = inst.cli("status", "--operation", "20261130T000000Z-0123abcd")
    assert unknown.returncode == 2 and "no operation" in unknown.stderr


def test_wait_times_out_without_a_daemon(inst: Instance) -> None:
    name = inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")["operation"][
        "operation_id"]
    assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
    waited = inst.cli("wait", "--operation", name, "--timeout", "0.3")
    assert waited.returncode == 1
    assert waited.stdout.startswith(f"timed out after 0.3 s; operation {name} is still "
                                    "scheduled\n")
    assert inst.cli("wait", "--timeout", "0.3").returncode == 1  # without an id too


@pytest.mark.parametrize("stdin", [b"", b"not json {", b"[1, 2]", b"\xff\xfe",
                                   b'{"session_id": 5}'])
def test_hook_stop_prints_nothing_and_exits_0_on_bad_input(inst: Instance, stdin: bytes) -> None:
    idle = inst.cli("hook-stop", stdin=stdin)
    assert (idle.returncode, idle.stdout) == (0, "")  # nothing waiting: nothing to do
    name = inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")["operation"][
        "operation_id"]
    done = inst.cli("hook-stop", stdin=stdin)
    assert (done.returncode, done.stdout) == (0, "")
    op = service.status(inst.config, name)
    assert op is not None and op.status is S.failed and op.error
    assert procs.log_lines(inst.config, "hook.log") == [
        f"hook-stop: operation {name} -> failed: {op.error}"]


def test_hook_stop_for_another_session_fails_the_request(inst: Instance) -> None:
    name = inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")["operation"][
        "operation_id"]
    other = "5e55a1d0-0000-4000-8000-0000000000ff"
    (inst.config.project_dir / f"{other}.jsonl").write_text("{}\n")
    done = inst.cli("hook-stop", stdin=inst.stop_json(other))
    assert (done.returncode, done.stdout) == (0, "")
    op = service.status(inst.config, name)
    assert op is not None and op.status is S.failed
    assert op.error == (f"the Stop came from session {other}, but the target runs session "
                        f"{SESSION}")


def test_hook_stop_logs_errors_and_still_exits_0(inst: Instance) -> None:
    inst.cli_json("request", "--reason", "r", "--confirm", "REBUILD")
    inst.config.state_dir.chmod(0o750)  # no longer trusted: the engine refuses it
    done = inst.cli("hook-stop", stdin=inst.stop_json())
    assert (done.returncode, done.stdout) == (0, "")
    (line,) = procs.log_lines(inst.config, "hook.log")
    assert line == (f"hook-stop error: UntrustedStateDir: state dir not trusted: "
                    f"{inst.config.state_dir} has mode 0750, not 0700 (chmod 700 it)")


def test_hook_stop_latency(inst: Instance) -> None:
    """It works, every time; the timing is reported by benchmarks/bench_switch.py."""
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        done = inst.cli("hook-stop", stdin=inst.stop_json())
        timings.append(time.perf_counter() - started)
        assert (done.returncode, done.stdout) == (0, "")
    print(f"\nhook-stop with nothing waiting: median {statistics.median(timings):.3f} s")


def test_a_second_daemon_is_refused(inst: Instance) -> None:
    with inst.daemon():
        second = inst.cli("serve")
    assert second.returncode == 1
    assert second.stderr == (f"kael-thread-rebuild: another daemon already serves state dir "
                             f"{inst.config.state_dir} (it holds "
                             f"{inst.config.state_dir / 'daemon.lock'})\n")
    with pytest.raises(DaemonBusy), inst.daemon():
        serve(inst.config, once=True)


def test_start_recovers_what_a_dead_worker_left(inst: Instance) -> None:
    op = service.request(inst.config, "r", "REBUILD")
    store = OperationStore(inst.config.state_dir)
    store.transition(op.operation_id, S.scheduled, source_path=str(inst.source),
                     source_session_id=SESSION)
    store.transition(op.operation_id, S.running, "worker started")  # and then it died

    serve(inst.config, once=True)

    settled = store.load(op.operation_id)
    assert settled.status is S.failed
    assert settled.error == ("interrupted before switching: the operation was running when the "
                             "worker stopped")
    assert procs.log_lines(inst.config, "worker.log")[1:3] == [
        f"operation {op.operation_id}: running -> failed (nothing switched): {settled.error}",
        "recovery settled 1 operation(s)"]
    assert inst.pointer.read_text() == f"{SESSION}\n"


def test_stop_event_ends_the_loop(inst: Instance) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(inst.config,), kwargs={"stop_event": stop})
    thread.start()
    try:
        wait_until(lambda: any(line.startswith("daemon ready") for line in
                               procs.log_lines(inst.config, "worker.log")), 10,
                   what="the daemon")
        op = service.request(inst.config, "r", "REBUILD")
        assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
        settled = service.wait(inst.config, op.operation_id, 20)
        assert settled is not None and settled.status is S.activated
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_sigterm_stops_at_a_step_boundary_and_the_next_start_recovers(tmp_path: Path) -> None:
    inst = make_instance(tmp_path / "slow", stability_interval_seconds=1.5)
    with inst.daemon() as daemon:
        op = service.request(inst.config, "r", "REBUILD")
        assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
        wait_until(lambda: procs.wait_for_status(inst.config, ["running"], 10), 10,
                   what="the worker to start")
        daemon.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert daemon.wait(15) == 0
        # It left the operation where it was, at the end of the stability wait.
        assert time.monotonic() - started < 10
    left = service.status(inst.config, op.operation_id)
    assert left is not None and left.status in (S.running, S.verifying)
    assert procs.log_lines(inst.config, "worker.log")[-1] == "daemon stopped"

    serve(inst.config, once=True)

    recovered = service.status(inst.config, op.operation_id)
    assert recovered is not None and recovered.status is S.failed
    assert recovered.error.startswith("interrupted before switching")
    assert inst.pointer.read_text() == f"{SESSION}\n"


def test_hook_stop_exits_0_even_when_the_config_is_broken(inst: Instance) -> None:
    # Claude Code 2.1.328 takes a Stop hook's exit 2 as "do not stop" and feeds the message to
    # the model, up to 9 times in a row: the hook must exit 0 whatever happens.
    quiet = inst.config_path.read_text() + "no_such_key = 1\n"
    inst.config_path.write_text(quiet)
    done = inst.cli("hook-stop", stdin=inst.stop_json())
    assert (done.returncode, done.stdout) == (0, "")  # nothing waits: not even read further

    inst.config_path.write_text(quiet.replace("no_such_key = 1\n", ""))
    assert inst.cli("request", "--reason", "r", "--confirm", "REBUILD").returncode == 0
    inst.config_path.write_text(quiet)
    done = inst.cli("hook-stop", stdin=inst.stop_json())
    assert (done.returncode, done.stdout) == (0, "")
    assert "no_such_key: unknown key" in done.stderr
