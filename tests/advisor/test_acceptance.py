"""The advisor's acceptance matrix (issue 23), one test a row: the real Claude Code consults the
real Kimi Code CLI through the prompt hook and the MCP server `kael-advisor-mcp`, both CLIs
against loopback stand-ins of their providers. What the advisor was sent is read from the
provider stand-in's log; what Claude Code was given back, from its own stand-in's log and
stdout."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kael_advisor import pieces
from kael_advisor.modes import MODES
from tests.drill import procs
from tests.support.advisor_claude import (
    AdvisorPlace,
    StreamClaude,
    make_advisor_place,
)
from tests.support.claude_env import (
    TmuxClaude,
    claude_available,
    run_print,
    tmux_available,
    wait_mcp_tools_taken,
)
from tests.support.kimi_env import kimi_available, run_kimi
from tests.support.standin_api import StandinAPI
from tests.support.standin_openai import Reply, StandinOpenAI, system_text, user_prompts
from tests.switching.sandbox import wait_until

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not kimi_available(), reason="the Kimi Code CLI is not installed"),
]

def results(stdout: str) -> dict[str, list[str]]:
    """The tool results the scripted model quoted at the end of its turn, by tool."""
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"^\[(advisor_\w+)\] (.*?)(?=^\[advisor_\w+\] |\Z)", stdout,
                             re.S | re.M):
        found.setdefault(match[1], []).append(match[2].strip())
    return found


def answers(stdout: str) -> list[str]:
    """The finished consultations' answers (the polls that were no longer waiting)."""
    return [text for text in results(stdout).get("advisor_poll", [])
            if not text.startswith("⏳")]


def claude(place: AdvisorPlace, plan: str, **options: Any) -> tuple[str, str | None]:
    result = run_print(place.claude, f"PLAN: {plan}", timeout=180, **options)
    assert "RESULTS" in result.stdout, result.stdout + result.stderr
    return result.stdout, result.session_id


def test_1_create_then_consult_twice_sends_the_first_exchange_again(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    kimi_api.queue(Reply("first advice: start with the lock"),
                   Reply("second advice: then the atomic write"))
    out, session = claude(place, "create auth goal=safe table writes | "
                                 "consult: where do I start? | consult: and after that?")
    assert [a.split(":", 1)[1].strip() for a in answers(out)] == [
        "first advice: start with the lock", "second advice: then the atomic write"], out
    first, second = kimi_api.chat_bodies()
    assert user_prompts(first)[-1].endswith("where do I start?")
    history = second["messages"]
    assert [m["content"] for m in history if m["role"] == "assistant"] == [
        "first advice: start with the lock"]
    assert any(p.endswith("where do I start?") for p in user_prompts(second)[:-1])
    assert second["prompt_cache_key"] == first["prompt_cache_key"]
    [binding] = place.table_data()["bindings"].values()
    assert binding["name"] == "auth" and binding["claude_session"] == session
    assert binding["kimi_session"] == first["prompt_cache_key"]


def test_2_a_second_create_renames_the_task_and_keeps_its_kimi_session(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    out, session = claude(place, "create alpha goal=the goal | consult: q1 | create beta | "
                                 "consult: q2 | list")
    first, second = kimi_api.chat_bodies()
    kimi_session = first["prompt_cache_key"]
    assert second["prompt_cache_key"] == kimi_session
    renamed = results(out)["advisor_create_task"][1]
    assert "'alpha' renamed 'beta'" in renamed and kimi_session in renamed, renamed
    [listed] = results(out)["advisor_list_tasks"]
    assert "beta" in listed and kimi_session in listed and "alpha" not in listed, listed
    [binding] = place.table_data()["bindings"].values()
    assert (binding["name"], binding["kimi_session"], binding["goal"]) == (
        "beta", kimi_session, "the goal")
    assert binding["claude_session"] == session
    assert len(place.kimi.sessions()) == 1


def test_3_blueprint_mode_reaches_the_provider_and_the_answer_comes_back_whole(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    order = "\n".join(f"{n}. step {n}: " + "do the careful thing, " * 12 + "check."
                      for n in range(1, 60))
    kimi_api.queue(Reply(order))
    out, _ = claude(place, "consult blueprint: a cache for the plan")
    [body] = kimi_api.chat_bodies()
    assert user_prompts(body)[-1].startswith(MODES["blueprint"])
    assert user_prompts(body)[-1].endswith("a cache for the plan")
    # The scripted model quotes the tool result of Claude Code's request: all of it, not a cut.
    [answer] = answers(out)
    assert order in answer and len(order) > 4000


def test_4_a_resumed_claude_code_continues_the_binding(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    kimi_api.queue(Reply("advice before the restart"))
    _, session = claude(place, "consult: before")
    assert session is not None
    claude(place, "consult: after", resume=session)
    first, second = kimi_api.chat_bodies()
    assert second["prompt_cache_key"] == first["prompt_cache_key"]
    assert "advice before the restart" in [m["content"] for m in second["messages"]
                                           if m["role"] == "assistant"]
    [binding] = place.table_data()["bindings"].values()
    assert binding["claude_session"] == session
    assert binding["kimi_session"] == first["prompt_cache_key"]
    assert len(binding["consultations"]) == 2


def test_5_two_windows_on_one_project_bind_apart_without_cross_talk(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    with StreamClaude(place.claude) as a, StreamClaude(place.claude) as b:
        for prompt_a, prompt_b in (("from A one", "from B one"), ("from A two", "from B two")):
            assert "RESULTS" in a.turn(f"PLAN: consult: {prompt_a}")
            assert "RESULTS" in b.turn(f"PLAN: consult: {prompt_b}")
    assert a.session_id and b.session_id and a.session_id != b.session_id
    bindings = place.table_data()["bindings"]
    assert set(bindings) == {a.session_id, b.session_id}
    kimi_a, kimi_b = bindings[a.session_id]["kimi_session"], bindings[b.session_id]["kimi_session"]
    assert kimi_a and kimi_b and kimi_a != kimi_b
    for body in kimi_api.chat_bodies():
        said = " ".join(user_prompts(body))
        window = "A" if "from A" in said else "B"
        assert f"from {'B' if window == 'A' else 'A'}" not in said, said
        assert body["prompt_cache_key"] == (kimi_a if window == "A" else kimi_b)
    last_a = [b for b in kimi_api.chat_bodies() if "from A two" in " ".join(user_prompts(b))]
    assert any("from A one" in p for p in user_prompts(last_a[0]))


@contextlib.contextmanager
def interactive(place: AdvisorPlace, *args: str) -> Iterator[TmuxClaude]:
    """An interactive Claude Code in tmux (own socket, DO-NOT-CREATE names) with the advisor's
    slash commands installed and its MCP server's tools taken in."""
    for name, text in pieces.templates().items():
        if name.startswith("commands/"):
            target = place.claude.config_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    with TmuxClaude(place.claude, args) as tui:
        tui.wait_for("❯", timeout=60)
        _, pid = procs.pane(tui.socket, tui.target)
        registered = place.claude.config_dir / "sessions" / f"{pid}.json"
        session = wait_until(lambda: registered.exists() and json.loads(
            registered.read_text()).get("sessionId"), timeout=60,
            what="Claude Code to register its session")
        wait_mcp_tools_taken(place.claude, pieces.SERVER_NAME, session)
        yield tui


def until_done(tui: TmuxClaude, timeout: float = 90) -> tuple[str, list[str]]:
    """Answers Yes to every permission dialog until the scripted model's RESULTS are on the
    screen; the screen, and the tool each dialog asked for."""
    asked: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tui.capture()
        if "RESULTS" in screen and "✻" in screen:
            return screen, asked
        if "Do you want to proceed?" in screen:
            tool = _dialog_tool(screen)
            asked.append(tool)
            _answer_yes(tui, tool)
        time.sleep(0.2)
    raise TimeoutError(f"no RESULTS within {timeout:g} s:\n{tui.capture()}")


def _dialog_tool(screen: str) -> str | None:
    """The advisor tool the permission dialog on SCREEN asks for (None: no dialog)."""
    if "Do you want to proceed?" not in screen:
        return None
    return re.findall(r"advisor-mcp — (Advisor [\w ]+?) Tool", screen)[0]


def _answer_yes(tui: TmuxClaude, tool: str | None, tries: int = 3) -> None:
    """Enter on the dialog that asks for TOOL, until it is gone: on a loaded machine a key sent
    while the dialog is still being drawn can be lost (the same dialog is still up 30 s later),
    so Enter is sent again while that dialog, not the next one, is on the screen."""
    for _ in range(tries):
        tui.send_keys("Enter")
        with contextlib.suppress(TimeoutError):
            tui.wait_for(lambda now: _dialog_tool(now) != tool, timeout=10)
            return
    raise TimeoutError(f"the dialog for {tool} stayed after {tries} Enters:\n{tui.capture()}")


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
def test_6_blueprint_in_an_interactive_claude_code(
        tmp_path: Path, claude_api: StandinAPI, kimi_api: StandinOpenAI) -> None:
    place = make_advisor_place(tmp_path, claude_api.url, kimi_api.url,
                               permissions=pieces.permissions())
    kimi_api.queue(Reply("WORK ORDER: 1. read the plan 2. cache its scan 3. test the cache"))
    with interactive(place) as tui:
        tui.submit("/blueprint a cache for plans PLAN: create plan-cache goal=fast plans | "
                   "consult blueprint: a cache for plans")
        screen, asked = until_done(tui)
    assert "WORK ORDER: 1. read the plan 2. cache its scan 3. test the cache" in screen, screen
    assert "✅ consultation #t1" in screen
    # The installed permissions: create and consult ask, poll is allowed.
    assert asked == ["Advisor Create Task", "Advisor Consult"], asked
    assert any("get a blueprint from the advisor for: a cache for plans" in json.dumps(b)
               for b in claude_api.message_bodies())
    [body] = kimi_api.chat_bodies()  # the task's goal, then the blueprint instruction
    assert f"fast plans\n\n{MODES['blueprint']}\n\na cache for plans" in user_prompts(body)[-1]
    [binding] = place.table_data()["bindings"].values()
    assert (binding["name"], binding["goal"]) == ("plan-cache", "fast plans")


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
def test_4_an_interactive_claude_code_continued_keeps_the_binding(
        place: AdvisorPlace, kimi_api: StandinOpenAI) -> None:
    kimi_api.queue(Reply("said before the restart"), Reply("said after the restart"))
    with interactive(place) as tui:
        tui.submit("PLAN: consult: before the restart")
        tui.wait_for("said before the restart", timeout=90)
    with interactive(place, "--continue") as tui:
        tui.submit("PLAN: consult: after the restart")
        tui.wait_for("said after the restart", timeout=90)
    first, second = kimi_api.chat_bodies()
    assert second["prompt_cache_key"] == first["prompt_cache_key"]
    assert "said before the restart" in [m["content"] for m in second["messages"]
                                         if m["role"] == "assistant"]
    [binding] = place.table_data()["bindings"].values()
    assert len(binding["consultations"]) == 2


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
def test_7_a_denied_consult_runs_nothing(
        tmp_path: Path, claude_api: StandinAPI, kimi_api: StandinOpenAI) -> None:
    place = make_advisor_place(tmp_path, claude_api.url, kimi_api.url,
                               permissions=pieces.permissions())
    with interactive(place) as tui:
        tui.submit("PLAN: consult: the secret question")
        screen = tui.wait_for("Do you want to proceed?", timeout=60)
        assert "Advisor Consult" in screen and "the secret question" in screen
        tui.send_keys("Escape")  # "Esc to cancel": the call is denied
        tui.wait_for(lambda now: "Do you want to proceed?" not in now, timeout=30)
        time.sleep(3)  # a consultation that started would have reached the provider by now
    assert kimi_api.chat_bodies() == []
    assert not (place.project / ".agent" / "advisor-consultations").exists() or not list(
        (place.project / ".agent" / "advisor-consultations").iterdir())
    assert not place.table.exists() or not place.table_data()["bindings"]
    denied = [b for b in claude_api.message_bodies() if "the secret question" in json.dumps(b)]
    assert not any("consultation started" in json.dumps(b) for b in denied)


def test_8_a_bare_kimi_in_another_project_is_unchanged(
        place: AdvisorPlace, kimi_api: StandinOpenAI, tmp_path: Path) -> None:
    claude(place, "consult: read-only, please")
    other = tmp_path / "another-project"
    other.mkdir()
    bare = run_kimi(place.kimi, "hello from a bare kimi", cwd=other)
    assert bare.returncode == 0, bare.stderr
    advisor_body, bare_body = kimi_api.chat_bodies()
    tools = [{t["function"]["name"] for t in body["tools"]} for body in (advisor_body,
                                                                        bare_body)]
    assert tools[0] <= {"Read", "Glob", "Grep"}
    assert {"Write", "Bash", "Edit"} <= tools[1]
    persona = system_text(advisor_body)
    assert "advisor" in persona and persona != system_text(bare_body)
    assert system_text(bare_body).startswith("You are Kimi Code CLI")
    assert not list(place.kimi.kimi_home.glob("agents/**/*.md"))


def test_a_prompt_without_a_consultation_binds_nothing(place: AdvisorPlace) -> None:
    """The hook only notes the window: no table, no Kimi session until a consultation."""
    result = run_print(place.claude, "hello", timeout=120)
    assert "stand-in reply" in result.stdout
    assert [json.loads(p.read_text())["session_id"] for p in place.sessions.glob("*.json")] == [
        result.session_id]
    assert not place.table.exists() and not place.kimi.sessions()
