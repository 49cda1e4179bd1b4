"""The pointer base: atomic writes, kept mode, content identity."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import Refused
from kael_thread_rebuild.switching.pointer import (
    NEW_POINTER_MODE,
    PointerBase,
    PointerError,
    runner_script,
    session_in,
)
from tests.switching.sandbox import safe_config


def _config(tmp_path: Path) -> Config:
    return safe_config(tmp_path, activation="pointer")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_switch_writes_the_id_and_a_newline_into_a_new_file(tmp_path: Path) -> None:
    base = PointerBase(_config(tmp_path))
    session_id = str(uuid.uuid4())

    assert base.switch_to(session_id) == [session_id]

    assert base.path.read_bytes() == f"{session_id}\n".encode()
    assert _mode(base.path) == NEW_POINTER_MODE == 0o600
    assert sorted(p.name for p in base.path.parent.iterdir()) == [base.path.name]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_switch_replaces_the_file_atomically_keeping_its_mode(tmp_path: Path,
                                                              mode: int) -> None:
    base = PointerBase(_config(tmp_path))
    base.path.write_text(f"{uuid.uuid4()}\n")
    base.path.chmod(mode)
    old_inode = base.path.stat().st_ino
    session_id = str(uuid.uuid4())

    base.switch_to(session_id)

    # A new inode renamed over the old one: a reader sees the old file or the new one, whole.
    assert base.path.stat().st_ino != old_inode
    assert base.path.read_text() == f"{session_id}\n"
    assert _mode(base.path) == mode
    assert sorted(p.name for p in base.path.parent.iterdir()) == [base.path.name]


def test_identity_is_the_content_digest_and_changes_when_someone_edits(tmp_path: Path) -> None:
    base = PointerBase(_config(tmp_path))
    first = str(uuid.uuid4())
    base.switch_to(first)
    before = base.identity()
    assert before.base == "pointer"
    assert before.token == {"sha256": hashlib.sha256(f"{first}\n".encode()).hexdigest()}
    assert before.running_session_id == first
    assert base.identity() == before

    base.path.write_text(f"{first}\n\n")  # same session, other bytes: still someone else's edit
    assert base.identity() != before
    other = str(uuid.uuid4())
    base.path.write_text(other)
    assert base.identity().running_session_id == other
    assert base.running_session() == other


@pytest.mark.parametrize("content", [b"", b"not-a-uuid\n", b"\xff\xfe", b"%s\n%s\n" % (
    str(uuid.uuid4()).encode(), str(uuid.uuid4()).encode())])
def test_a_pointer_without_one_session_id_is_not_alive(tmp_path: Path, content: bytes) -> None:
    base = PointerBase(_config(tmp_path))
    base.path.write_bytes(content)
    assert not base.alive()
    assert base.running_session() is None
    assert base.identity().running_session_id is None


def test_a_missing_pointer_is_not_alive_and_has_no_identity(tmp_path: Path) -> None:
    base = PointerBase(_config(tmp_path))
    assert not base.alive()
    assert base.running_session() is None
    with pytest.raises(PointerError, match=r"^pointer file .* does not exist$"):
        base.identity()


def test_only_session_ids_are_written(tmp_path: Path) -> None:
    base = PointerBase(_config(tmp_path))
    base.path.write_text("keep\n")
    for bad in ("", "abc", "../x", f"{uuid.uuid4()}\nrm -rf"):
        with pytest.raises(Refused):
            base.switch_to(bad)
    assert base.path.read_text() == "keep\n"


def test_a_symlinked_pointer_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real-pointer"
    real.write_text(f"{uuid.uuid4()}\n")
    base = PointerBase(_config(tmp_path))
    os.symlink(real, base.path)
    with pytest.raises(PointerError, match="symlink"):
        base.switch_to(str(uuid.uuid4()))
    with pytest.raises(PointerError, match="symlink"):
        base.identity()
    assert base.path.is_symlink()


def test_the_base_needs_a_pointer_path(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="resume_pointer_path"):
        PointerBase(safe_config(tmp_path, resume_pointer_path=None))


def test_session_ids_are_uuids_in_either_case() -> None:
    session_id = str(uuid.uuid4())
    assert session_in(f"  {session_id.upper()}\n".encode()) == session_id.upper()
    assert session_in(session_id.encode()[:-1]) is None


def test_the_reference_runner_ships_with_the_package() -> None:
    assert runner_script().startswith("#!/usr/bin/env bash\n")
