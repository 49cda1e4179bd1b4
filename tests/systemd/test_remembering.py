"""A systemd household never forgets at a restart: the example start script with an empty pointer
mints the session id and writes it to the pointer before Claude Code starts, so every restart
resumes that session; and a reload restarts the unit onto the session it runs (also when the
pointer was left empty by an older start script), through the switch's machinery. The real
Claude Code in the unit, typed into through the unit's terminal (a FIFO of a socket unit).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import OperationKind, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.operations.worker import run_operation
from tests.operations.harness import stop_input
from tests.support.fidelity import conversation_texts
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import wait_until

from . import test_drill
from .test_drill import FLAGS, REGISTER_TIMEOUT, Stage, submit_on

# The systemd drill's fixtures: its household, stand-in API and stage (a unit of its own).
api, household, stage = test_drill.api, test_drill.household, test_drill.stage

#: Claude Code writes its `stop_hook_summary` record only when a Stop hook ran: the worker
#: waits for it before it restarts anything.
STOP_SUMMARY = b'"subtype":"stop_hook_summary"'
STOP_HOOK = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}


def typed_unit(stage: Stage) -> Path:
    """The stage's unit with a keyboard (a FIFO) and a Stop hook; returns the FIFO."""
    stage.claude.write_settings({"permissions": {"allow": ["Bash"]}, **STOP_HOOK})
    keys = stage.pointer.parent.parent / "terminal-input"
    environment = {**stage.claude.env, "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "root"}
    stage.household.install_claude_unit(stage.unit, workdir=stage.claude.cwd,
                                        pointer=stage.pointer, environment=environment,
                                        flags=FLAGS, input_fifo=keys)
    return keys


def started_on_empty_pointer(stage: Stage) -> str:
    assert not stage.pointer.exists()
    stage.household.systemctl("start", stage.unit)
    base = stage.base()
    try:
        return wait_until(base.running_session, timeout=REGISTER_TIMEOUT,
                          what="the unit's Claude Code to register")
    except TimeoutError:
        raise AssertionError(stage.household.journal(stage.unit)) from None


def say(stage: Stage, api: StandinAPI, keys: Path, session: str, prompt: str) -> dict[str, Any]:
    """Type PROMPT into the unit's Claude Code; the API request it sent, once its answer is in
    the transcript and its Stop hook ran."""
    transcript = stage.claude.session_path(session)

    def stops() -> int:
        return transcript.read_bytes().count(STOP_SUMMARY) if transcript.exists() else 0

    stopped = stops()
    stage.wait_idle(session)
    submit_on(keys, prompt,
              lambda: transcript.exists() and prompt in transcript.read_text())

    def answered() -> list[dict[str, Any]]:
        return [body for body in api.message_bodies()
                if conversation_texts(body)[-1:] == [("user", prompt)]]

    body: dict[str, Any] = wait_until(answered, timeout=REGISTER_TIMEOUT,
                                      what=f"the API to be asked {prompt!r}")[0]
    wait_until(lambda: stops() > stopped, timeout=REGISTER_TIMEOUT,
               what="the turn's Stop in the transcript")
    return body


def restart(stage: Stage) -> str:
    """`systemctl restart` of the unit; the claude pid it runs before."""
    pid = stage.base().identity().token["claude_pid"]
    stage.household.systemctl("restart", stage.unit)
    return pid


def test_the_first_start_mints_the_session_and_every_restart_resumes_it(
        stage: Stage, api: StandinAPI) -> None:
    keys = typed_unit(stage)
    session = started_on_empty_pointer(stage)
    assert stage.pointer.read_text() == f"{session}\n"
    journal = stage.household.journal(stage.unit)
    assert f"claude-start: no session in {stage.pointer}; starting a new session, {session} " \
           "(written there)" in journal

    # Restarted before a word was said: there is no transcript to --resume yet.
    old_pid = restart(stage)
    stage.wait_running(session)
    assert stage.base().identity().token["claude_pid"] != old_pid
    assert f"claude-start: session {session} has no transcript yet; starting it" \
        in stage.household.journal(stage.unit)

    first = f"remember {stage.unit}: the kingfisher is blue"
    say(stage, api, keys, session, first)
    transcript = stage.claude.session_path(session)
    before = transcript.read_bytes()

    restart(stage)
    stage.wait_running(session)
    assert f"claude-start: resuming session {session}" in stage.household.journal(stage.unit)
    body = say(stage, api, keys, session, f"{stage.unit}: what colour was it?")
    assert ("user", first) in conversation_texts(body), "the restart forgot the conversation"
    assert transcript.read_bytes().startswith(before)
    assert len(transcript.read_bytes()) > len(before)
    assert sorted(p.stem for p in stage.claude.project_dir.glob("*.jsonl")) == [session]
    assert stage.pointer.read_text() == f"{session}\n"


@pytest.mark.parametrize("pointer_left", ["minted", "empty"])
def test_a_reload_restarts_the_unit_onto_the_session_it_runs(
        stage: Stage, api: StandinAPI, pointer_left: str) -> None:
    keys = typed_unit(stage)
    session = started_on_empty_pointer(stage)
    first = f"reload {stage.unit}: remember 5521"
    say(stage, api, keys, session, first)
    if pointer_left == "empty":  # as an older start script left it on a household
        stage.pointer.write_text("")
    base = stage.base()
    before = base.identity()
    transcript = stage.claude.session_path(session)

    requested = service.request_reload(stage.config, "RELOAD")
    scheduled = service.record_stop(stage.config, stop_input(stage.config, session, transcript),
                                    base)
    assert scheduled is not None and scheduled.status is OperationStatus.scheduled
    op = run_operation(stage.config, OperationStore(stage.config.state_dir), base,
                       requested.operation.operation_id)

    assert op.status is OperationStatus.activated, op.error
    assert op.kind is OperationKind.reload and op.new_session_id == session
    assert stage.pointer.read_text() == f"{session}\n"
    after = base.identity()
    assert after.running_session_id == session
    assert after.token["claude_pid"] != before.token["claude_pid"]
    size = op.source_size or 0
    assert size and hashlib.sha256(transcript.read_bytes()[:size]).hexdigest() \
        == op.source_sha256
    body = say(stage, api, keys, session, f"{stage.unit}: which number?")
    assert ("user", first) in conversation_texts(body)
    assert sorted(p.stem for p in stage.claude.project_dir.glob("*.jsonl")) == [session]
