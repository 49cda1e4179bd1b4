"""The pointer base end to end: the shipped reference runner drives the real `claude -p`, hands
each Stop to our `hook-stop` and runs our `wait` (without an operation id) before the next call;
the daemon rewrites the pointer, and the next call resumes the rebuilt session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kael_thread_rebuild.operations.model import OperationStatus
from kael_thread_rebuild.switching.pointer import runner_script
from tests.guard import MARK, TEST_SOCKET_PREFIX
from tests.support.claude_env import claude_available, find_claude_binary, make_claude_env
from tests.support.fidelity import conversation_texts, non_text_block_types
from tests.support.standin_api import Reply, StandinAPI, Text, ToolUse, prompt_script

from . import procs

S = OperationStatus
pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
]

P_FIRST = "pointer one: list the numbers, then remember 4217"
A_FIRST_TOOL = "Listing them."
A_FIRST = "Done; I will remember 4217."
P_SECOND = "pointer two: which number was it?"
A_SECOND = "It was 4217."


def test_the_runner_resumes_the_rebuilt_session_after_wait(tmp_path: Path) -> None:
    responder = prompt_script({
        P_FIRST: [Reply([Text(A_FIRST_TOOL), ToolUse("Bash", {"command": "seq 1 5000"})]),
                  Reply([Text(A_FIRST)])],
        P_SECOND: [Reply([Text(A_SECOND)])],
    })
    with StandinAPI(responder) as api:
        claude = make_claude_env(tmp_path / "claude", api.url)
        pointer, config_path = tmp_path / "pointer", tmp_path / "kael.toml"
        config = procs.write_config(config_path, {
            "project_dir": claude.project_dir, "state_dir": tmp_path / "state",
            "activation": "pointer", "resume_pointer_path": pointer,
            "tmux_target": f"{MARK}-unused:0.0", "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-x"})
        runner = tmp_path / "pointer_runner.sh"
        runner.write_text(runner_script())
        env = {**claude.env, "CLAUDE_BIN": str(find_claude_binary()),
               "KAEL_CMD": f"{procs.CLI} --config {config_path}", "KAEL_WAIT_TIMEOUT": "60"}

        with procs.daemon(config_path, tmp_path / "daemon.stderr"):
            asked = procs.run_cli(config_path, "request", "--reason", "drill", "--confirm",
                                  "REBUILD")
            assert asked.returncode == 0, asked.stderr
            ran = subprocess.run(["bash", str(runner), str(pointer)], env=env, cwd=claude.cwd,
                                 input=f"{P_FIRST}\n{P_SECOND}\n", capture_output=True,
                                 text=True, timeout=180, check=False)
        bodies = api.message_bodies()

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [A_FIRST, A_SECOND]
    op = procs.latest(config)
    assert op is not None and op.status is S.activated, op and op.error
    assert pointer.read_text() == f"{op.new_session_id}\n"
    assert "wait failed" not in ran.stderr and "hook-stop failed" not in ran.stderr
    body = bodies[-1]
    assert conversation_texts(body) == [("user", P_FIRST), ("assistant", A_FIRST_TOOL),
                                        ("assistant", A_FIRST), ("user", P_SECOND)]
    assert non_text_block_types(body) == set()
    assert claude.session_path(op.new_session_id or "").exists()
