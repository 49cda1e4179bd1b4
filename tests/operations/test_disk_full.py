"""A full disk, through the real command line and a real `serve` process (issue 8, item 6).

Each test mounts a real 1 MiB tmpfs (root only) and fills it. What the user must see: one line
naming the file that could not be written (never a traceback, never blaming the transcript when
a write failed), exit code 1, nothing half-written; the daemon logs it and keeps serving.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kael_thread_rebuild.operations import service
from tests.drill import procs
from tests.operations.harness import write_source
from tests.switching.sandbox import wait_until
from tests.test_operation_commands import Instance, make_instance

NO_SPACE = "No space left on device"
ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "kael-test-small-disk",
                    str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros until the disk has no byte left; returns the filler (delete it to free)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, bytes(1 << 16)):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def test_candidate_into_a_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path,
                                                                  small_disk: Path) -> None:
    inst = make_instance(tmp_path / "instance")
    write_source(inst.config, turns=4000)  # its candidate needs a few MiB: the write fails late
    out = private_dir(small_disk / "out")
    done = inst.cli("candidate", "--transcript", str(inst.source), "--output-dir", str(out))
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert re.fullmatch(rf"kael-thread-rebuild: cannot write {re.escape(str(out))}/{ID}"
                        rf"\.(jsonl|manifest\.json): {NO_SPACE}", line), line
    assert list(out.iterdir()) == []  # no candidate, no manifest, no temporary file


def test_request_on_a_full_state_dir_is_one_line_and_writes_no_record(tmp_path: Path,
                                                                      small_disk: Path) -> None:
    state = private_dir(small_disk / "state")
    inst = make_instance(tmp_path / "instance", state_dir=state)
    fill(small_disk)
    done = inst.cli("request", "--reason", "the human asked", "--confirm", "REBUILD")
    assert done.returncode == 1
    line = one_line(done.stderr)
    operations = state / "operations"
    assert re.fullmatch(rf"kael-thread-rebuild: cannot write {re.escape(str(operations))}/"
                        rf"\S+\.json: {NO_SPACE}", line), line
    assert list(operations.iterdir()) == []
    assert service.status(inst.config) is None


def _switch(inst: Instance) -> str:
    """Request a rebuild, send the Stop, wait until it settles; returns its status."""
    asked = inst.cli("request", "--reason", "the human asked", "--confirm", "REBUILD")
    assert asked.returncode == 0, asked.stderr
    assert inst.cli("hook-stop", stdin=inst.stop_json()).returncode == 0
    op = procs.wait_for_status(inst.config, ["activated", "failed", "rolled_back"], 30)
    return op.status.value


def test_serve_on_a_full_state_dir_keeps_serving(tmp_path: Path, small_disk: Path) -> None:
    state = private_dir(small_disk / "state")
    inst = make_instance(tmp_path / "instance", state_dir=state)
    filler = fill(small_disk)
    stderr = tmp_path / "daemon.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([str(procs.CLI), "--config", str(inst.config_path), "serve"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                env=procs.cli_env(), start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or "daemon ready" in stderr.read_text(),
                   20, what="the daemon to say it is ready")
        time.sleep(0.5)
        assert proc.poll() is None, stderr.read_text()
        said = stderr.read_text().splitlines()
        assert said[0] == (f"kael-thread-rebuild serve: cannot write {state}/worker.log: "
                           f"{NO_SPACE}"), said
        assert "Traceback" not in stderr.read_text()

        filler.unlink()  # space again: the same daemon takes the next request
        assert _switch(inst) == "activated"
        op = service.status(inst.config)
        assert op is not None and inst.pointer.read_text() == f"{op.new_session_id}\n"
        assert proc.poll() is None
    finally:
        assert procs.stop_process(proc) == 0


def test_a_full_project_dir_fails_the_operation_by_name_and_the_daemon_goes_on(
        tmp_path: Path, small_disk: Path) -> None:
    project = small_disk / "project"
    project.mkdir()
    inst = make_instance(tmp_path / "instance", project_dir=project)
    with inst.daemon() as daemon:
        filler = fill(small_disk)  # the source fits; the candidate written beside it does not
        assert _switch(inst) == "failed"
        op = service.status(inst.config)
        assert op is not None
        assert re.fullmatch(rf"cannot write {re.escape(str(project))}/{ID}"
                            rf"\.(jsonl|manifest\.json): {NO_SPACE}", op.error), op.error
        assert [path.name for path in project.iterdir()] == [inst.source.name]
        assert inst.pointer.read_text().strip() == op.source_session_id

        filler.unlink()
        assert _switch(inst) == "activated"
        assert daemon.poll() is None
    assert (inst.root / "daemon.stderr").read_text() == ""


def test_a_backup_that_does_not_fit_names_the_backup_not_the_transcript(
        tmp_path: Path, small_disk: Path) -> None:
    state = private_dir(small_disk / "state")
    inst = make_instance(tmp_path / "instance", state_dir=state)
    write_source(inst.config, turns=4000)  # a few MiB: its backup cannot fit in the state dir
    with inst.daemon():
        assert _switch(inst) == "failed"
    op = service.status(inst.config)
    assert op is not None
    backups = state / "backups" / op.operation_id
    assert op.error == (f"cannot write {backups}/{op.source_session_id}.jsonl: {NO_SPACE}"), \
        op.error
    assert list(backups.iterdir()) == []  # no part of a backup is left
    assert inst.pointer.read_text().strip() == op.source_session_id
