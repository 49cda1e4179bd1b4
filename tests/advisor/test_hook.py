"""The prompt hook through its entry point: one file per window, written atomically; any bad
event ends with exit 0, nothing on stdout and one line in its log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kael_advisor.places import HOOK_LOG, SESSIONS_FOLDER, window_file
from tests.advisor.advisor_env import HOOK_BIN
from tests.test_mcp_startup import _imported

SID = "0123abcd-1111-2222-3333-444455556666"


def _hook(stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(HOOK_BIN)], input=stdin, env={**os.environ, **env},
                          capture_output=True, timeout=60, check=False)


def _event(session_id: str = SID, cwd: str = "/home/u/project") -> bytes:
    return json.dumps({"session_id": session_id, "cwd": cwd, "prompt": "hi",
                       "hook_event_name": "UserPromptSubmit"}).encode()


def test_a_prompt_writes_its_window_file(tmp_path: Path) -> None:
    done = _hook(_event(), {"KAEL_ADVISOR_SESSIONS": str(tmp_path)})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    written = tmp_path / window_file("/home/u/project", SID)
    assert written.name.endswith("-0123abcd.json")
    record = json.loads(written.read_text())
    assert record["session_id"] == SID and record["cwd"] == "/home/u/project"
    assert isinstance(record["written_at"], float)
    assert sorted(p.name for p in tmp_path.iterdir()) == [written.name]  # no temporary left


def test_two_windows_on_one_project_write_two_files(tmp_path: Path) -> None:
    for session_id in (SID, "99999999-aaaa"):
        _hook(_event(session_id), {"KAEL_ADVISOR_SESSIONS": str(tmp_path)})
    _hook(_event(SID), {"KAEL_ADVISOR_SESSIONS": str(tmp_path)})  # rewritten, not added

    assert len(list(tmp_path.glob("*.json"))) == 2


def test_the_default_directory_is_a_folder_of_its_own_in_claude_config(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KAEL_ADVISOR_SESSIONS"}
    done = subprocess.run([str(HOOK_BIN)], input=_event(), capture_output=True, timeout=60,
                          env={**env, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")},
                          check=False)

    assert done.returncode == 0
    assert [p.parent.name for p in (tmp_path / "claude").rglob("*.json")] == [SESSIONS_FOLDER]


@pytest.mark.parametrize("stdin", [
    b"", b"not json", b"[1, 2]", b'{"cwd": "/p"}', b'{"session_id": "x"}',
    b'{"session_id": 5, "cwd": "/p"}', b'{"session_id": "a\\u0000b", "cwd": "/p"}',
    b"[" * 200_000 + b"]" * 200_000, b"\xff\xfe garbage",
], ids=["empty", "text", "list", "no-session", "no-cwd", "number", "nul", "deep", "binary"])
def test_a_bad_event_never_fails_the_prompt(tmp_path: Path, stdin: bytes) -> None:
    done = _hook(stdin, {"KAEL_ADVISOR_SESSIONS": str(tmp_path)})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert list(tmp_path.glob("*.json")) == []
    log = (tmp_path / HOOK_LOG).read_text().splitlines()
    assert len(log) == 1 and "kael-advisor-hook: not recorded" in log[0]


def test_an_unwritable_directory_never_fails_the_prompt(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = _hook(_event(), {"KAEL_ADVISOR_SESSIONS": str(blocker / "sessions")})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_hook_imports_the_standard_library_only(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", str(HOOK_BIN)],
                          input=_event(), capture_output=True, timeout=60, check=True,
                          env={**os.environ, "KAEL_ADVISOR_SESSIONS": str(tmp_path)})
    imported = _imported(done.stderr.decode())

    assert "kael_advisor.hook" in imported  # the report is real
    heavy = {name.split(".")[0] for name in imported} & {
        "pydantic", "orjson", "filelock", "mcp", "anyio", "kael_advisor.table"}
    assert heavy == set()
    assert len(list(tmp_path.glob("*.json"))) == 1
