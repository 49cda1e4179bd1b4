"""The prompt hook as a household runs it: the zipapp the advisor's image carries
(/opt/kael-advisor/kael-advisor-hook.pyz), copied out and run with the host's `python3 -I`, which
sees no venv and no project: a real event writes the window file, a bad one ends with exit 0 and
one line in the hook's log. The zipapp's builder refuses a hook that imports a third-party
package."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kael_advisor.places import HOOK_LOG, window_file
from tests.advisor.test_image import advisor_image, appliance_image, dock  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "image" / "advisor" / "hook-zipapp.py"
IN_IMAGE = "/opt/kael-advisor/kael-advisor-hook.pyz"
HOST_PYTHON = "/usr/bin/python3"


@pytest.fixture
def zipapp(advisor_image: str, tmp_path: Path) -> Path:  # noqa: F811
    out = tmp_path / "kael-advisor-hook.pyz"
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat",
                           advisor_image, IN_IMAGE], capture_output=True, timeout=60, check=True)
    out.write_bytes(done.stdout)
    return out


def _run(zipapp: Path, stdin: bytes, sessions: Path,
         home: Path) -> subprocess.CompletedProcess[bytes]:
    if not Path(HOST_PYTHON).exists():
        pytest.skip(f"no {HOST_PYTHON} on this host")
    # Only what Claude Code's hook runner would pass; PYTHONPATH would be ignored by -I anyway.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KAEL_ADVISOR_SESSIONS": str(sessions),
           "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([HOST_PYTHON, "-I", str(zipapp)], input=stdin, env=env, cwd=home,
                          capture_output=True, timeout=30, check=False)


def test_the_zipapp_records_a_real_event_with_the_hosts_python(zipapp: Path,
                                                               tmp_path: Path) -> None:
    project, sessions = tmp_path / "project", tmp_path / "sessions"
    project.mkdir()
    session = str(uuid.uuid4())
    transcript = tmp_path / f"{session}.jsonl"
    transcript.write_text(json.dumps({"type": "user", "sessionId": session,
                                      "message": {"role": "user", "content": "hello"}}) + "\n")
    event = {"session_id": session, "transcript_path": str(transcript), "cwd": str(project),
             "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
             "prompt": "review the plan"}

    done = _run(zipapp, json.dumps(event).encode(), sessions, tmp_path)

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    written = json.loads((sessions / window_file(str(project), session)).read_text())
    assert (written["session_id"], written["cwd"]) == (session, str(project))
    assert written.get("conversation", session) == session
    assert not (sessions / HOOK_LOG).exists()


def test_a_bad_event_exits_0_with_one_log_line(zipapp: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"

    done = _run(zipapp, b"{not json", sessions, tmp_path)

    assert (done.returncode, done.stdout) == (0, b"")
    [line] = (sessions / HOOK_LOG).read_text().splitlines()
    assert "kael-advisor-hook: not recorded (JSONDecodeError" in line, line
    assert not list(sessions.glob("*.json"))


def test_the_builder_refuses_a_hook_that_imports_a_third_party_package(tmp_path: Path) -> None:
    fake = tmp_path / "src" / "kael_advisor"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "hook.py").write_text("import pydantic\n\ndef main() -> int:\n    return 0\n")

    done = subprocess.run([sys.executable, str(BUILDER), str(tmp_path / "out.pyz")],
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "src")},
                          capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode != 0 and "pydantic" in done.stderr, done.stderr
    assert not (tmp_path / "out.pyz").exists()
