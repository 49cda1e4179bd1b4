"""The pointer base end to end: the shipped reference runner drives the real `claude -p`, hands
each Stop to our `hook-stop` and runs our `wait` (without an operation id) before the next call;
the daemon rewrites the pointer, and the next call resumes the rebuilt session. When that call
cannot start (the program is missing), the old session comes back and answers the prompt."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations.model import OperationStatus
from kael_thread_rebuild.switching.pointer import runner_script, session_in
from tests.guard import MARK, TEST_SOCKET_PREFIX
from tests.support.claude_env import (
    ClaudeEnv,
    claude_available,
    find_claude_binary,
    make_claude_env,
)
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


@dataclass
class PointerInstance:
    """A pointer-base instance over a real Claude Code layout, with the reference runner."""

    claude: ClaudeEnv
    pointer: Path
    config_path: Path
    config: Config
    runner: Path

    def request_and_run(self, program: Path) -> subprocess.CompletedProcess[str]:
        """Request a rebuild (the daemon serving), then run the runner on PROGRAM with the two
        prompts."""
        asked = procs.run_cli(self.config_path, "request", "--reason", "drill", "--confirm",
                              "REBUILD")
        assert asked.returncode == 0, asked.stderr
        env = {**self.claude.env, "CLAUDE_BIN": str(program),
               "KAEL_CMD": f"{procs.CLI} --config {self.config_path}",
               "KAEL_WAIT_TIMEOUT": "60"}
        return subprocess.run(["bash", str(self.runner), str(self.pointer)], env=env,
                              cwd=self.claude.cwd, input=f"{P_FIRST}\n{P_SECOND}\n",
                              capture_output=True, text=True, timeout=180, check=False)


def _pointer_instance(tmp_path: Path, api_url: str) -> PointerInstance:
    claude = make_claude_env(tmp_path / "claude", api_url)
    pointer, config_path = tmp_path / "pointer", tmp_path / "kael.toml"
    config = procs.write_config(config_path, {
        "project_dir": claude.project_dir, "state_dir": tmp_path / "state",
        "activation": "pointer", "resume_pointer_path": pointer,
        "tmux_target": f"{MARK}-unused:0.0", "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-x"})
    runner = tmp_path / "pointer_runner.sh"
    runner.write_text(runner_script())
    return PointerInstance(claude, pointer, config_path, config, runner)


def test_the_runner_resumes_the_rebuilt_session_after_wait(tmp_path: Path) -> None:
    responder = prompt_script({
        P_FIRST: [Reply([Text(A_FIRST_TOOL), ToolUse("Bash", {"command": "seq 1 5000"})]),
                  Reply([Text(A_FIRST)])],
        P_SECOND: [Reply([Text(A_SECOND)])],
    })
    with StandinAPI(responder) as api:
        place = _pointer_instance(tmp_path, api.url)
        claude, pointer, config = place.claude, place.pointer, place.config
        with procs.daemon(place.config_path, tmp_path / "daemon.stderr"):
            ran = place.request_and_run(find_claude_binary())
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


@contextmanager
def program_gone_while_switched(program: Path, pointer: Path, first: list[str]) -> Iterator[
        list[str]]:
    """Remove PROGRAM (a link to Claude Code) as soon as the pointer names another session than
    the first one it named (kept in FIRST), as an update would at that moment; put it back once
    the pointer names that first session again. Yields what happened, in order."""
    events: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.01):
            named = session_in(pointer.read_bytes()) if pointer.exists() else None
            if named is None:
                continue
            if not first:
                first.append(named)
            elif named != first[0] and program.is_symlink():
                program.unlink()
                events.append(f"removed at {named}")
            elif named == first[0] and not program.is_symlink() and events:
                program.symlink_to(find_claude_binary())
                events.append(f"restored at {named}")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield events
    finally:
        stop.set()
        watcher.join()


def test_a_program_missing_when_the_runner_starts_the_new_session_brings_the_old_one_back(
        tmp_path: Path) -> None:
    responder = prompt_script({P_FIRST: [Reply([Text(A_FIRST)])],
                               P_SECOND: [Reply([Text(A_SECOND)])]})
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.symlink_to(find_claude_binary())
    with StandinAPI(responder) as api:
        place = _pointer_instance(tmp_path, api.url)
        claude, pointer, config = place.claude, place.pointer, place.config
        first: list[str] = []
        with procs.daemon(place.config_path, tmp_path / "daemon.stderr"), \
                program_gone_while_switched(program, pointer, first) as events:
            ran = place.request_and_run(program)
        bodies = api.message_bodies()

    op = procs.latest(config)
    assert op is not None and op.new_session_id is not None, op
    (old,) = first
    new = op.new_session_id
    assert events == [f"removed at {new}", f"restored at {old}"]
    assert ran.returncode == 0, ran.stderr
    assert "claude exited with status 127" in ran.stderr
    assert f"session {new} did not start; the prompt goes to session {old}" in ran.stderr
    assert ran.stdout.splitlines() == [A_FIRST, A_SECOND]  # the prompt was not lost
    assert op.status is S.rolled_back and op.rollback_ok is True, op.error
    assert op.error == (f"the runner could not start session {new}: claude exited with status "
                        "127; the old session was resumed")
    assert pointer.read_text() == f"{old}\n"
    # The old session answered: the API saw its conversation, and its transcript took the turn.
    (body,) = [b for b in bodies if ("user", P_SECOND) in conversation_texts(b)]
    assert conversation_texts(body) == [("user", P_FIRST), ("assistant", A_FIRST),
                                        ("user", P_SECOND)]
    assert P_SECOND in claude.session_path(old).read_text()
    # The new session never ran: out of the project dir (and Claude Code's /resume list).
    assert not claude.session_path(new).exists()
    assert op.candidate_path is not None and Path(op.candidate_path).is_relative_to(
        config.state_dir / "candidates")
    assert [line for line in procs.log_lines(config, "worker.log") if "->" in line][-1] == (
        f"operation {op.operation_id}: rollback_scheduled -> rolled_back (returned to the old "
        f"session): {op.error}")
