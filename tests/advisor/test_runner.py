"""The runner against the real Kimi Code CLI and the provider stand-in: a first run and its
resume, the hang guard, a provider that is down, an unknown session, and the read-only agent."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from kael_advisor import runner
from kael_advisor.errors import AdvisorError, SessionLost
from kael_advisor.modes import with_mode
from kael_advisor.service import seeded
from kael_advisor.tools import MAX_GOAL, MAX_MESSAGE
from tests.advisor.advisor_env import running_in
from tests.advisor.kimi_fixture import (
    Advised,
    advised,
    assert_searches_found,
    needs_kimi,
    project_searches,
)
from tests.support.kimi_env import run_kimi
from tests.support.standin_openai import Reply, ToolCall, message_texts, system_text, user_prompts

__all__ = ["advised"]  # fixture


@needs_kimi
def test_a_first_run_and_its_resume_keep_the_conversation(advised: Advised) -> None:
    advised.api.queue(Reply("Noted: the word is PLUM."), Reply("The word was PLUM."))

    first = runner.run(advised.project, "Remember the word PLUM.", None)
    second = runner.run(advised.project, "Which word?", first.session_id)

    assert first.session_id.startswith("session_") and second.session_id == first.session_id
    assert (first.transcript.answer, second.transcript.answer) == (
        "Noted: the word is PLUM.", "The word was PLUM.")
    opening, follow_up = advised.api.chat_bodies()
    assert "You are the advisor of a coding executor" in system_text(opening)  # our agent
    assert user_prompts(follow_up)[:1] == ["Remember the word PLUM."]
    assert "Noted: the word is PLUM." in message_texts(follow_up, "assistant")


@needs_kimi
def test_the_hang_guard_stops_a_silent_advisor(advised: Advised) -> None:
    advised.api.queue(Reply(hang=True))
    started = time.monotonic()

    with pytest.raises(AdvisorError) as caught:
        runner.run(advised.project, "hello?", None, idle=2)

    assert "no first byte from the advisor in 2 s" in str(caught.value)
    assert time.monotonic() - started < 20
    assert running_in(advised.project) == []  # killed, not left waiting on its provider


@needs_kimi
def test_a_provider_that_is_down_fails_fast_in_one_line(advised: Advised) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    advised.kimi.base_url = f"http://127.0.0.1:{closed}/v1"
    advised.kimi.write_config(max_attempts_per_step=2)
    started = time.monotonic()

    with pytest.raises(AdvisorError) as caught:
        runner.run(advised.project, "hello?", None)

    assert time.monotonic() - started < 30
    assert "the Kimi Code CLI failed (exit 1): error: failed to run prompt: " \
        "provider.connection_error" in str(caught.value)
    assert str(caught.value).endswith("(after 1 retry)")
    assert "\n" not in str(caught.value)


@needs_kimi
def test_an_unknown_session_is_reported_as_lost(advised: Advised) -> None:
    with pytest.raises(SessionLost, match="not found"):
        runner.run(advised.project, "hello?", "session_00000000-0000-4000-8000-000000000000")


def _writes(project: Path) -> list[ToolCall]:
    return [ToolCall("Write", {"file_path": str(project / "written.txt"), "path":
                               str(project / "written.txt"), "content": "x"}),
            ToolCall("Bash", {"command": f"touch {project / 'by-bash'}"})]


@needs_kimi
def test_a_write_or_bash_the_model_asks_for_does_not_happen(advised: Advised) -> None:
    advised.api.queue(Reply("I will write.", tool_calls=_writes(advised.project)),
                      Reply("I could not."))

    outcome = runner.run(advised.project, "write a file", None)

    assert not (advised.project / "written.txt").exists()
    assert not (advised.project / "by-bash").exists()
    assert outcome.transcript.failed_tools >= 1
    results = message_texts(advised.api.chat_bodies()[-1], "tool")
    assert len(results) == 2 and all("Tool execution failed" in text for text in results)
    assert 'Tool "Write" not found' in results[0]


@needs_kimi
def test_control_without_our_agent_the_same_write_happens(advised: Advised) -> None:
    """What the test above guards against: Kimi's default agent runs Write and Bash in -p."""
    advised.api.queue(Reply("I will write.", tool_calls=_writes(advised.project)),
                      Reply("Done."))

    run_kimi(advised.kimi, "write a file")

    assert (advised.project / "by-bash").exists()


@needs_kimi
def test_glob_and_grep_the_model_asks_for_find_the_project_files(advised: Advised) -> None:
    """Kimi's Glob and Grep run ripgrep (`rg` on the PATH): without it they fail offline."""
    advised.api.queue(Reply("Let me look.", tool_calls=project_searches(advised.project)),
                      Reply("Found it in src/plum.py."))

    outcome = runner.run(advised.project, "where is the word?", None)

    assert_searches_found(message_texts(advised.api.chat_bodies()[-1], "tool"))
    assert outcome.transcript.failed_tools == 0


def _fake_kimi(tmp_path: Path, body: str) -> Path:
    """A stand-in program for the Kimi Code CLI: Python that prints stream-json lines."""
    program = tmp_path / "fake-kimi"
    program.write_text(f"#!{sys.executable}\nimport json, sys, time\n"
                       "def say(**line):\n    print(json.dumps(line), flush=True)\n" + body)
    program.chmod(0o755)
    return program


def test_an_advisor_that_keeps_talking_has_no_total_limit(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAEL_ADVISOR_KIMI", str(_fake_kimi(tmp_path, """
for n in range(5):
    time.sleep(0.6)
    say(role="assistant", content=f"part {n}")
say(role="meta", type="session.resume_hint", session_id="session_long")
""")))
    started = time.monotonic()

    outcome = runner.run(tmp_path, "think long", None, idle=1.5)

    assert time.monotonic() - started > 2.5  # longer than the guard, never silent that long
    assert outcome.session_id == "session_long" and outcome.transcript.answer.endswith("part 4")


def test_silence_after_speaking_is_no_output(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAEL_ADVISOR_KIMI", str(_fake_kimi(tmp_path, """
say(role="assistant", content="let me think")
time.sleep(60)
""")))

    with pytest.raises(AdvisorError, match=r"^no output from the advisor in 1 s"):
        runner.run(tmp_path, "hello", None, idle=1)


def test_the_longest_message_reaches_the_cli(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """One argument is capped at 128 KiB: the largest message, goal and mode instruction fit."""
    monkeypatch.setenv("KAEL_ADVISOR_KIMI", str(_fake_kimi(tmp_path, """
say(role="assistant", content=str(len(sys.argv[sys.argv.index("-p") + 1].encode())))
say(role="meta", type="session.resume_hint", session_id="session_big")
""")))
    message = seeded("g" * MAX_GOAL, with_mode("m" * MAX_MESSAGE, "blueprint"))

    outcome = runner.run(tmp_path, message, None, idle=20)

    assert int(outcome.transcript.answer) == len(message.encode()) > MAX_MESSAGE + MAX_GOAL
