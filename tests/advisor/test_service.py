"""The five tools' behaviour (through their declaration, as the MCP server calls them) against
the real Kimi Code CLI: auto-binding consultations, polls, self-healing, results that survive a
restart, create / rename / force_new, close and archive, and the bad input of the spec."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kael_advisor.errors import AdvisorError
from kael_advisor.modes import MODES
from kael_advisor.places import table_path
from kael_advisor.registry import Consultation
from kael_advisor.service import Advisor
from kael_advisor.table import BindingTable
from kael_advisor.tools import MAX_MESSAGE, tool
from tests.advisor.advisor_env import write_window
from tests.advisor.kimi_fixture import Advised, advised, needs_kimi
from tests.support.standin_openai import Reply, last_user_text, system_text, user_prompts

__all__ = ["advised"]  # fixture
CONVERSATION = "c0ffee00-1111-2222-3333-444444444444"


def _advisor(advised: Advised, conversation: str = CONVERSATION) -> Advisor:
    write_window(advised.sessions, conversation, advised.project)
    return Advisor(advised.project, advised.sessions)


def _call(advisor: Advisor, tool_name: str, **given: Any) -> str:
    return tool(tool_name).call(advisor, given)


def _number(started: str) -> str:
    assert started.startswith("⏳ consultation started #t"), started
    return started.split("#", 1)[1].split(" ", 1)[0]


def _consult(advisor: Advisor, **given: Any) -> str:
    """Consult and wait for the answer; the poll's text."""
    number = _number(_call(advisor, "advisor_consult", **given))
    advisor.wait(number, timeout=120)
    return _call(advisor, "advisor_poll", task=number)


@needs_kimi
def test_consult_binds_and_continues_one_kimi_session(advised: Advised) -> None:
    advisor = _advisor(advised)
    advised.api.queue(Reply("First answer."), Reply("Second answer."))

    first = _consult(advisor, message="Remember PLUM.")
    second = _consult(advisor, message="Which word?", mode="review")

    assert first.startswith("✅ consultation #t1") and "First answer." in first
    assert "Second answer." in second
    binding = BindingTable(advised.project).read().bindings[CONVERSATION]
    assert binding.kimi_session is not None and binding.consultations == ["t1", "t2"]
    opening, follow_up = advised.api.chat_bodies()
    assert "You are the advisor" in system_text(opening)
    assert user_prompts(follow_up)[0] == "Remember PLUM."
    assert last_user_text(follow_up) == f"{MODES['review']}\n\nWhich word?"


@needs_kimi
def test_a_lost_session_is_rebuilt_from_the_goal(advised: Advised) -> None:
    advisor = _advisor(advised)
    _call(advisor, "advisor_create_task", name="auth", goal="Add login to the shop.")

    def forget(table: Any) -> None:
        table.bindings[CONVERSATION].kimi_session = "session_00000000-0000-4000-8000-0000000000aa"

    advisor.table.change(forget)
    advised.api.queue(Reply("Fresh start."))

    answer = _consult(advisor, message="Go on.")

    assert "Fresh start." in answer and "earlier context was lost" in answer
    binding = BindingTable(advised.project).read().bindings[CONVERSATION]
    assert binding.kimi_session not in (None, "session_00000000-0000-4000-8000-0000000000aa")
    assert binding.kimi_session in answer
    assert last_user_text(advised.api.chat_bodies()[-1]) == \
        "Goal of this task: Add login to the shop.\n\nGo on."


@needs_kimi
def test_a_failed_run_is_a_failed_task_and_the_binding_stays(advised: Advised) -> None:
    advisor = _advisor(advised)
    advised.api.queue(Reply(http_status=400))  # a request the provider refuses: no retry

    answer = _consult(advisor, message="hello")

    assert answer.startswith("❌ consultation #t1 failed: ") and "\n" not in answer
    assert CONVERSATION in BindingTable(advised.project).read().bindings


def test_a_finished_answer_survives_a_restart(tmp_path: Path) -> None:
    before = Advisor(tmp_path, tmp_path / "sessions")
    done = before.registry.start(CONVERSATION, "task", "question", None)
    done.status, done.answer, done.finished_at = "done", "the answer", time.time()
    before.registry.save(done)
    running = before.registry.start(CONVERSATION, "task", "question 2", None)
    running.answer = "half an ans"
    before.registry.save(running)

    after = Advisor(tmp_path, tmp_path / "sessions")  # another server, the first one alive
    assert "the answer" in after.poll("t1")
    assert after.poll("#t2").startswith("⏳ the advisor is still thinking (#t2")

    gone = Consultation.model_validate({**running.model_dump(), "owner": "gone"})
    after.registry.save(gone)  # its server is gone (no process holds its lock)
    said = after.poll("t2")
    assert said.startswith("⚠ consultation #t2 was interrupted") and "half an ans" in said


def test_create_renames_and_reuses_unless_force_new(tmp_path: Path) -> None:
    advisor = Advisor(tmp_path, tmp_path / "sessions")
    write_window(tmp_path / "sessions", CONVERSATION, tmp_path)
    _call(advisor, "advisor_create_task", name="one")

    def used(table: Any) -> None:
        table.bindings[CONVERSATION].kimi_session = "session_one"

    advisor.table.change(used)

    renamed = _call(advisor, "advisor_create_task", name="two")
    assert "renamed 'two'" in renamed and "session_one" in renamed
    _call(advisor, "advisor_create_task", name="three", force_new=True)

    table = BindingTable(tmp_path).read()
    assert (table.bindings[CONVERSATION].name, table.bindings[CONVERSATION].kimi_session) == \
        ("three", None)
    assert [(b.name, b.kimi_session, b.status) for b in table.archived] == [
        ("two", "session_one", "closed")]
    listing = _call(advisor, "advisor_list_tasks")
    assert "▶ three · open" in listing and "two · closed (archived) · Kimi session " \
        "session_one" in listing


def test_close_keeps_the_record_and_the_next_consult_archives_it(tmp_path: Path,
                                                                 monkeypatch:
                                                                 pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAEL_ADVISOR_KIMI", str(tmp_path / "no-kimi"))
    advisor = Advisor(tmp_path, tmp_path / "sessions")
    write_window(tmp_path / "sessions", CONVERSATION, tmp_path)
    _call(advisor, "advisor_create_task", name="first")

    assert "closed" in _call(advisor, "advisor_close_task")
    number = _number(_call(advisor, "advisor_consult", message="again"))
    advisor.wait(number, 60)

    table = BindingTable(tmp_path).read()
    assert [b.name for b in table.archived] == ["first"]
    assert table.bindings[CONVERSATION].status == "open"
    said = _call(advisor, "advisor_poll", task=number)
    assert said.startswith(f"❌ consultation #{number} failed: the Kimi Code CLI")
    assert "cannot be started" in said and "\n" not in said


@pytest.mark.parametrize(("name", "given", "said"), [
    ("advisor_consult", {"message": "x", "mode": "brainstorm"}, "mode: unknown mode"),
    ("advisor_consult", {"message": "  "}, "message: the message is empty"),
    ("advisor_consult", {"message": "x" * (MAX_MESSAGE + 1)}, "more than 100000"),
    ("advisor_consult", {"message": "ü" * (MAX_MESSAGE // 2 + 1)}, "100002 bytes, more than"),
    ("advisor_consult", {"message": "x", "task_id": "nobody"}, "no task 'nobody'"),
    ("advisor_close_task", {"task_id": "nobody"}, "no task 'nobody'"),
    ("advisor_poll", {"task": "t99"}, "no consultation #t99"),
    ("advisor_poll", {"task": "../x"}, "not a consultation number"),
    ("advisor_create_task", {"name": "a\nb"}, "name: the name must be one line"),
])
def test_bad_input_is_one_line_and_the_table_intact(tmp_path: Path, name: str,
                                                    given: dict[str, Any], said: str) -> None:
    advisor = Advisor(tmp_path, tmp_path / "sessions")
    write_window(tmp_path / "sessions", CONVERSATION, tmp_path)
    _call(advisor, "advisor_create_task", name="kept")
    before = table_path(tmp_path).read_bytes()

    with pytest.raises(AdvisorError) as caught:
        _call(advisor, name, **given)

    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert table_path(tmp_path).read_bytes() == before


def test_a_table_of_another_version_is_refused_and_kept(tmp_path: Path) -> None:
    advisor = Advisor(tmp_path, tmp_path / "sessions")
    write_window(tmp_path / "sessions", CONVERSATION, tmp_path)
    path = table_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 7, "bindings": {}}))

    for name, given in (("advisor_consult", {"message": "x"}), ("advisor_list_tasks", {}),
                        ("advisor_create_task", {"name": "n"}), ("advisor_close_task", {})):
        with pytest.raises(AdvisorError, match="of another version"):
            _call(advisor, name, **given)
    assert json.loads(path.read_text()) == {"version": 7, "bindings": {}}


@needs_kimi
def test_two_windows_on_one_project_bind_separately(advised: Advised) -> None:
    other = "0ther000-1111-2222-3333-444444444444"
    advised.api.queue(Reply("to A"), Reply("to B"), Reply("A again"))
    advisor = _advisor(advised)  # window A spoke last

    assert "to A" in _consult(advisor, message="from A")
    write_window(advised.sessions, other, advised.project / "sub", time.time() + 1)  # B speaks
    assert "to B" in _consult(advisor, message="from B")
    write_window(advised.sessions, CONVERSATION, advised.project, time.time() + 2)  # A again
    assert "A again" in _consult(advisor, message="A's second")

    bindings = BindingTable(advised.project).read().bindings
    assert bindings[CONVERSATION].kimi_session != bindings[other].kimi_session
    assert (bindings[CONVERSATION].consultations, bindings[other].consultations) == (
        ["t1", "t3"], ["t2"])
    third = advised.api.chat_bodies()[2]
    assert "from A" in user_prompts(third) and "from B" not in user_prompts(third)
