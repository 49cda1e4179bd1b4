"""The reference runner `pointer_runner.sh`: a fake claude for its mechanics, then the real one."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.switching.pointer import runner_script
from tests.support.claude_env import claude_available, find_claude_binary, make_claude_env
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import base_env, write_minimal_session

#: Logs its argv and stdin; as `claude`, also plays the Stop hook the runner installs; as
#: `kael`, switches the pointer to $NEXT_SESSION on the first `wait` (what the engine would do).
FAKE = """\
import json, os, sys
role, args = sys.argv[1], sys.argv[2:]
stdin = sys.stdin.read()
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"role": role, "args": args, "stdin": stdin}) + "\\n")
if role == "claude":
    flag = "--resume" if "--resume" in args else "--session-id"
    session = args[args.index(flag) + 1]
    with open(os.environ["KAEL_RUNNER_STOP_FILE"], "w") as stop:
        json.dump({"session_id": session, "hook_event_name": "Stop"}, stop)
    print("reply for " + args[-1])
elif "wait" in args and os.environ.get("NEXT_SESSION"):
    done = os.environ["FAKE_LOG"] + ".switched"
    if not os.path.exists(done):
        with open(os.environ["POINTER"], "w") as pointer:
            pointer.write(os.environ["NEXT_SESSION"] + "\\n")
        open(done, "w").close()
"""


def _fake(tmp_path: Path, role: str) -> Path:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    wrapper = tmp_path / f"fake-{role}"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} {role} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _runner(tmp_path: Path) -> Path:
    path = tmp_path / "pointer_runner.sh"
    path.write_text(runner_script())
    return path


def _log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(tmp_path: Path, pointer: Path, prompts: str, env: dict[str, str], cwd: Path,
         *claude_args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(_runner(tmp_path)), str(pointer), *claude_args],
                          input=prompts, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=180, check=False)


def test_runner_mechanics_with_a_fake_claude(tmp_path: Path) -> None:
    pointer, log = tmp_path / "pointer", tmp_path / "calls.log"
    switched_to = str(uuid.uuid4())
    env = {**base_env(tmp_path), "CLAUDE_BIN": str(_fake(tmp_path, "claude")),
           "KAEL_CMD": f"{_fake(tmp_path, 'kael')} --config some.toml", "FAKE_LOG": str(log),
           "POINTER": str(pointer), "NEXT_SESSION": switched_to, "KAEL_WAIT_TIMEOUT": "7"}
    prompts = "first prompt\n\n-dash 'quoted' \"both\" ünï $HOME\nthird\n"

    proc = _run(tmp_path, pointer, prompts, env, tmp_path, "--model", "m x")

    assert proc.returncode == 0, proc.stderr
    calls = _log(log)
    claude_calls = [c for c in calls if c["role"] == "claude"]
    kael_calls = [c for c in calls if c["role"] == "kael"]
    first_id = claude_calls[0]["args"][2]
    stop_settings = claude_calls[0]["args"][4]
    assert [c["args"] for c in claude_calls] == [
        ["-p", "--session-id", first_id, "--settings", stop_settings, "--model", "m x", "--",
         "first prompt"],
        ["-p", "--resume", switched_to, "--settings", stop_settings, "--model", "m x", "--",
         "-dash 'quoted' \"both\" ünï $HOME"],
        ["-p", "--resume", switched_to, "--settings", stop_settings, "--model", "m x", "--",
         "third"],
    ]
    assert all(c["stdin"] == "" for c in claude_calls)  # claude never eats the runner's prompts
    assert json.loads(stop_settings)["hooks"]["Stop"][0]["hooks"][0]["type"] == "command"
    assert [c["args"] for c in kael_calls] == [
        ["--config", "some.toml", "hook-stop"], ["--config", "some.toml", "wait", "--timeout", "7"],
    ] * 3
    assert [json.loads(c["stdin"])["session_id"] for c in kael_calls[::2]] == [
        first_id, switched_to, switched_to]
    assert proc.stdout.splitlines() == [
        "reply for first prompt", "reply for -dash 'quoted' \"both\" ünï $HOME", "reply for third"]
    assert pointer.read_text() == f"{switched_to}\n"


def test_runner_reaches_the_engine_through_the_wrapper(tmp_path: Path) -> None:
    """A Claude user without Docker access: KAEL_RUN and KAEL_INSTANCE, each Stop handed over as
    `hook INSTANCE` and the wait as `wait INSTANCE` (the wrapper's two fixed lines)."""
    pointer, log = tmp_path / "pointer", tmp_path / "calls.log"
    switched_to = str(uuid.uuid4())
    env = {**base_env(tmp_path), "CLAUDE_BIN": str(_fake(tmp_path, "claude")),
           "KAEL_RUN": f"{_fake(tmp_path, 'kael')} -n", "KAEL_INSTANCE": "companion",
           "KAEL_CMD": "/nonexistent/kael-thread-rebuild", "FAKE_LOG": str(log),
           "POINTER": str(pointer), "NEXT_SESSION": switched_to}
    proc = _run(tmp_path, pointer, "first\nsecond\n", env, tmp_path)
    assert proc.returncode == 0 and "failed" not in proc.stderr, proc.stderr
    kael_calls = [c for c in _log(log) if c["role"] == "kael"]
    assert [c["args"] for c in kael_calls] == [
        ["-n", "hook", "companion"], ["-n", "wait", "companion"]] * 2
    claude_calls = [c for c in _log(log) if c["role"] == "claude"]
    assert [json.loads(c["stdin"])["session_id"] for c in kael_calls[::2]] == [
        claude_calls[0]["args"][2], switched_to]
    assert pointer.read_text() == f"{switched_to}\n"

    without = {k: v for k, v in env.items() if k != "KAEL_INSTANCE"}
    refused = _run(tmp_path, pointer, "third\n", without, tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "pointer_runner: KAEL_RUN needs KAEL_INSTANCE"


def test_runner_creates_the_pointer_with_mode_0600(tmp_path: Path) -> None:
    pointer, log = tmp_path / "pointer", tmp_path / "calls.log"
    env = {**base_env(tmp_path), "CLAUDE_BIN": str(_fake(tmp_path, "claude")),
           "KAEL_CMD": str(_fake(tmp_path, "kael")), "FAKE_LOG": str(log),
           "POINTER": str(pointer)}
    proc = _run(tmp_path, pointer, "hello\n", env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pointer.read_text() == f"{_log(log)[0]['args'][2]}\n"
    assert stat.S_IMODE(pointer.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pointer")) == [
        "pointer", "pointer_runner.sh"]


def test_runner_stops_on_a_pointer_without_a_session_id(tmp_path: Path) -> None:
    pointer, log = tmp_path / "pointer", tmp_path / "calls.log"
    pointer.write_text("garbage\n")
    env = {**base_env(tmp_path), "CLAUDE_BIN": str(_fake(tmp_path, "claude")),
           "KAEL_CMD": str(_fake(tmp_path, "kael")), "FAKE_LOG": str(log)}
    proc = _run(tmp_path, pointer, "hello\n", env, tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"pointer_runner: {pointer} does not hold a session id"
    assert _log(log) == []


@pytest.mark.real_claude
@pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed")
def test_runner_with_the_real_claude_resumes_what_the_pointer_names(tmp_path: Path) -> None:
    pointer, log = tmp_path / "pointer", tmp_path / "calls.log"
    rebuilt = str(uuid.uuid4())
    with StandinAPI() as api:
        claude = make_claude_env(tmp_path / "claude", api.url)
        write_minimal_session(claude.project_dir, rebuilt)
        env = {**claude.env, "CLAUDE_BIN": str(find_claude_binary()),
               "KAEL_CMD": str(_fake(tmp_path, "kael")), "FAKE_LOG": str(log),
               "POINTER": str(pointer), "NEXT_SESSION": rebuilt}

        proc = _run(tmp_path, pointer, "first prompt\nsecond prompt\n", env, claude.cwd)

        bodies = api.message_bodies()
    assert proc.returncode == 0, proc.stderr
    hook_inputs = [json.loads(c["stdin"]) for c in _log(log) if c["args"] == ["hook-stop"]]
    assert [h["hook_event_name"] for h in hook_inputs] == ["Stop", "Stop"]
    first, second = (h["session_id"] for h in hook_inputs)
    assert first != rebuilt and second == rebuilt
    for hook_input in hook_inputs:
        assert hook_input["cwd"] == str(claude.cwd)
        assert Path(hook_input["transcript_path"]) == claude.session_path(hook_input["session_id"])
        assert Path(hook_input["transcript_path"]).exists()
    # The second call ran on the rebuilt session: its history reached the model.
    last = json.dumps(bodies[-1]["messages"])
    assert "7391" in last and "second prompt" in last and "first prompt" not in last
    assert pointer.read_text() == f"{rebuilt}\n"
