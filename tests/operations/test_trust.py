"""A state dir that can be trusted, through the real command line and the real daemon: a state
dir others could write is refused; a planted record whose ids lead outside project_dir deletes
nothing; files in operations/ that are not records are skipped and reported, never stopping an
operation; the `recover` command runs the daemon's recovery, and a failed operation's candidate
leaves project_dir for the state dir."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest

from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.files import UnsafePath, confined
from kael_thread_rebuild.operations.model import Operation, OperationStatus, new_operation_id
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.paths import MANIFEST_SUFFIX
from tests.builder import SESSION
from tests.conftest import ConfigFactory
from tests.drill import procs
from tests.test_operation_commands import Instance, make_instance

from .test_recovery import happy, make_env, nothing, run_killed_at

S = OperationStatus
PROG = "kael-thread-rebuild"


@pytest.fixture
def inst(tmp_path: Path) -> Instance:
    return make_instance(tmp_path / "instance")


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


# -- the state dir itself ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o777, 0o701])
def test_a_state_dir_open_to_others_is_refused(inst: Instance, mode: int) -> None:
    state = inst.config.state_dir
    state.mkdir(mode=0o700)
    state.chmod(mode)
    for args in (["status"], ["history"], ["request", "--reason", "r", "--confirm", "REBUILD"],
                 ["serve", "--once"], ["recover"]):
        done = inst.cli(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr == (f"{PROG}: state dir not trusted: {state} has mode {mode:04o}, "
                               "not 0700 (chmod 700 it)\n"), args
        assert done.stdout == ""
    assert list(state.iterdir()) == []  # nothing was created in it
    doctor = inst.cli("doctor")
    line = next(line for line in doctor.stdout.splitlines() if " state_dir " in line)
    assert line.startswith("FAIL") and f"has mode {mode:04o}, not 0700" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another user needs root")
def test_a_state_dir_of_another_user_is_refused(inst: Instance) -> None:
    state = inst.config.state_dir
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    done = inst.cli("request", "--reason", "r", "--confirm", "REBUILD")
    assert done.returncode == 1
    assert done.stderr == (f"{PROG}: state dir not trusted: {state} belongs to uid 65534, not "
                           f"to uid {os.geteuid()} that runs the engine (chown it to "
                           f"{os.geteuid()})\n")
    assert list(state.iterdir()) == []


def test_a_folder_of_the_state_dir_open_to_others_is_refused(inst: Instance) -> None:
    service.open_store(inst.config)  # the store as the daemon makes it, 0700 throughout
    operations = inst.config.state_dir / "operations"
    operations.chmod(0o777)
    done = inst.cli("status")
    assert done.returncode == 1
    assert done.stderr == (f"{PROG}: state dir not trusted: {operations} has mode 0777, not "
                           "0700 (chmod 700 it)\n")


# -- a planted record ----------------------------------------------------------------------------


def plant(inst: Instance, status: str = "running", **fields: Any) -> Path:
    """A record as someone with write access to operations/ would plant it."""
    now = "2026-01-01T00:00:00Z"
    record = {"operation_id": new_operation_id(), "status": status, "created_at": now,
              "updated_at": now, "reason": "planted", "source_session_id": SESSION,
              "source_path": str(inst.source), **fields}
    path = inst.config.state_dir / "operations" / f"{record['operation_id']}.json"
    path.write_bytes(orjson.dumps(record))
    path.chmod(0o600)
    return path


def test_a_planted_record_whose_session_id_leads_outside_deletes_nothing(inst: Instance) -> None:
    victim = inst.root / "victim"
    victim.mkdir()
    important = [victim / "important.jsonl", victim / f"important{MANIFEST_SUFFIX}"]
    for path in important:
        path.write_text("the user's own file\n")
    service.open_store(inst.config)  # read-only commands create nothing
    planted = plant(inst, new_session_id="../victim/important", switch_target=None)

    served = inst.cli("serve", "--once")  # the daemon's start runs recovery
    assert served.returncode == 0, served.stderr
    assert all(path.read_text() == "the user's own file\n" for path in important)
    recovered = inst.cli("recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout.splitlines() == [
        "nothing to recover: no operation was left unsettled",
        f"skipped operations/{planted.name}: new_session_id: '../victim/important' is not a "
        "Claude Code session id (a UUID)"]
    assert all(path.read_text() == "the user's own file\n" for path in important)
    assert planted.exists()  # reported, not removed: it is evidence
    assert any(f"{planted.name} (new_session_id: '../victim/important'" in line
               for line in procs.log_lines(inst.config, "worker.log"))

    # A record with well-formed ids whose paths lead outside is refused where the path is built.
    outside = inst.root / "elsewhere" / f"{SESSION}.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(inst.source.read_bytes())
    with inst.daemon():
        second = plant(inst, status="scheduled", source_path=str(outside))
        assert inst.cli("wait", "--operation", second.stem, "--timeout", "30").returncode == 1
    op = service.status(inst.config, second.stem)
    assert op is not None and op.status is S.failed
    assert op.error == (f"refused path {str(outside)!r}: it is not a file directly in "
                        f"{inst.config.project_dir}")
    assert inst.pointer.read_text() == f"{SESSION}\n"


# -- files that are not records ------------------------------------------------------------------


def test_files_that_are_not_records_are_skipped_and_reported(inst: Instance) -> None:
    first = inst.cli_json("request", "--reason", "first", "--confirm", "REBUILD")["operation"]
    assert inst.cli("cancel", "--operation", first["operation_id"], "--confirm",
                    "CANCEL").returncode == 0
    operations = inst.config.state_dir / "operations"
    record = operations / f"{first['operation_id']}.json"
    empty, garbage, link = (f"{new_operation_id()}.json" for _ in range(3))
    strays = {f"{record.stem} (copy).json": record.read_bytes(), empty: b"",
              garbage: b"\x00garbage{"}
    for name, data in strays.items():
        (operations / name).write_bytes(data)
    (operations / link).symlink_to(record)
    listed = sorted(p.name for p in operations.iterdir() if p != record)

    # An operation still runs from request to activation.
    with inst.daemon():
        requested = inst.cli_json("request", "--reason", "second", "--confirm", "REBUILD")
        assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
        done = inst.cli("wait", "--operation", requested["operation"]["operation_id"],
                        "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].endswith(": activated")

    for command in ("status", "history"):
        shown = inst.cli(command)
        assert shown.returncode == 0
        skipped = [line for line in shown.stdout.splitlines() if line.startswith("skipped ")]
        assert [line.split(":")[0] for line in skipped] == [
            f"skipped operations/{name}" for name in listed], command
        data = inst.cli_json(command)
        assert [s["name"] for s in data["skipped"]] == listed
    problems = {s["name"]: s["problem"] for s in inst.cli_json("history")["skipped"]}
    assert problems[f"{record.stem} (copy).json"] == "not named <operation id>.json"
    assert sorted(problems.values()) == sorted([
        "not named <operation id>.json", "empty (0 bytes)", "not JSON",
        "a symbolic link, not a record"])
    history = inst.cli_json("history")["operations"]
    assert [(op["reason"], op["status"]) for op in history] == [
        ("first", "cancelled"), ("second", "activated")]

    doctor = inst.cli("doctor")
    line = next(line for line in doctor.stdout.splitlines() if " operations " in line)
    assert line.startswith("FAIL") and "(copy).json is not an operation record" in line
    assert f"fix: move the file(s) out of {operations}" in line


# -- recover -------------------------------------------------------------------------------------


def test_recover_settles_a_dead_workers_operation_and_moves_its_candidate_out(
        make_config: ConfigFactory, tmp_path: Path) -> None:
    reference = make_env(make_config, tmp_path / "reference")
    _, steps = run_killed_at(reference, happy(reference), None,
                             functools.partial(nothing, reference))
    env = make_env(make_config, tmp_path / "env")
    op = happy(env)
    # The worker is killed right after the candidate was written and verified.
    code, steps = run_killed_at(env, op, steps.index("check_source"),
                                functools.partial(nothing, env))
    assert code == -signal.SIGKILL and steps[-1] == "check_source"
    left = OperationStore(env.config.state_dir).load(op.operation_id)
    assert left.status is S.verifying and left.new_session_id is not None
    new = left.new_session_id
    assert (env.config.project_dir / f"{new}.jsonl").exists()
    config_path = tmp_path / "kael.toml"
    procs.write_config(config_path, {**env.config.model_dump(mode="json", exclude_none=True)})

    done = procs.run_cli(config_path, "recover", "--json")
    assert done.returncode == 0, done.stderr
    (settled,) = [Operation.model_validate(o) for o in orjson.loads(done.stdout)["settled"]]
    assert settled.status is S.failed
    assert settled.error == ("interrupted before switching: the operation was verifying when "
                             "the worker stopped")
    kept = env.config.state_dir / "candidates" / op.operation_id
    assert settled.candidate_path == str(kept / f"{new}.jsonl")
    assert settled.manifest_path == str(kept / f"{new}{MANIFEST_SUFFIX}")
    assert Path(settled.candidate_path).exists() and Path(settled.manifest_path).exists()
    assert sorted(p.name for p in env.config.project_dir.iterdir()) == [f"{SESSION}.jsonl"]
    assert env.base.pointer() == SESSION
    assert procs.log_lines(env.config, "worker.log")[-2:] == [
        f"operation {op.operation_id}: verifying -> failed (nothing switched): {settled.error}",
        "recovery settled 1 operation(s)"]
    again = procs.run_cli(config_path, "recover")
    assert again.returncode == 0
    assert again.stdout == "nothing to recover: no operation was left unsettled\n"
    status = procs.run_cli(config_path, "status", "--operation", op.operation_id)
    assert ["candidate", settled.candidate_path] in [line.split() for line in
                                                     status.stdout.splitlines()]


def test_recover_is_refused_while_a_daemon_serves(inst: Instance) -> None:
    with inst.daemon():
        before = tree(inst.config.state_dir / "operations")
        done = inst.cli("recover")
        assert tree(inst.config.state_dir / "operations") == before
    assert done.returncode == 1
    assert done.stderr == (f"{PROG}: a daemon serves state dir {inst.config.state_dir}: it "
                           "recovers on its start; restart the daemon instead of running "
                           "recover\n")


def test_recover_explains_itself(inst: Instance) -> None:
    done = inst.cli("recover", "--help")
    assert done.returncode == 0
    for needle in ("recovery a daemon start runs", "--json", "Not an MCP tool"):
        assert needle in " ".join(done.stdout.split())


# -- the one confinement helper ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../victim/important.jsonl", "..", ".", "", "sub/x.jsonl",
                                  "/etc/passwd", "a\0b.jsonl", "relative/../x.jsonl"])
def test_confined_refuses_what_leads_out_of_its_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafePath, match="is not a file directly in"):
        confined(tmp_path, name)


def test_confined_accepts_names_and_paths_directly_inside(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert confined(real, "x.jsonl") == real / "x.jsonl"
    assert confined(real, str(tmp_path / "link" / "x.jsonl")) == real / "x.jsonl"
    assert confined(tmp_path / "link", str(real / "x.jsonl")) == tmp_path / "link" / "x.jsonl"
