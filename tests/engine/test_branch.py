"""The active branch (spec §4): rewinds, missing parents, unlinked files, parallel tools."""

from __future__ import annotations

from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, plan_of


def test_rewind_leaves_the_abandoned_branch_behind(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("keep me")
    fork_point = b.say("first answer")[-1]["uuid"]
    b.user("abandoned question", expect=False)
    b.assistant({"type": "text", "text": "abandoned answer"})
    b.expected.pop()
    b.parent = fork_point
    b.user("edited question")
    b.say("answer on the new branch")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.abandoned_branch_records == 2


def test_missing_parent_is_bridged_within_five_seconds(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("one")
    b.say("two")
    b.parent = "missing-parent"
    b.user("three")
    b.say("four")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.bridged_missing_parents == 1


def test_missing_parent_far_in_time_cuts_the_history_like_claude_code(
        make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("old")
    b.say("old reply")
    b._tick += 3600
    b.parent = "missing-parent"
    b.user("new")
    b.say("new reply")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected[2:]


def test_unlinked_file_falls_back_to_file_order_and_says_so(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    for text in ("a", "b"):
        record = b.user(text)
        record["parentUuid"] = None
        b.say(f"re {text}")[-1]["parentUuid"] = None
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.branch_file_order_fallback
    assert any("file order" in note for note in plan.report.notes)


def test_parallel_speech_tool_off_the_walked_path_is_recovered(
        make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("send two things")
    made = b.assistant(
        {"type": "text", "text": "Doing both."},
        {"type": "tool_use", "id": "toolu_bash", "name": "Bash", "input": {"c": "x"}},
        {"type": "tool_use", "id": "toolu_reply", "name": "mcp__companion__reply",
         "input": {"text": "message for the phone"}},
    )
    b.expected.append(("assistant", "message for the phone"))
    # Block records chain text <- Bash <- reply; the Bash result finishes last and the next
    # turn hangs under it, so the reply's tool_use record is off the walked path.
    b.add(b._envelope("user", parent=made[2]["uuid"], message={"role": "user", "content": [
        {"tool_use_id": "toolu_reply", "type": "tool_result", "content": "sent"}]}), link=False)
    b.add(b._envelope("user", parent=made[1]["uuid"], message={"role": "user", "content": [
        {"tool_use_id": "toolu_bash", "type": "tool_result", "content": "x"}]}))
    b.say("Both done.")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.abandoned_branch_records == 0


def test_parallel_tool_results_are_not_counted_as_abandoned(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("run three")
    b.parallel_tools(["1", "2", "3"], text="Running.")
    b.say("All three ran.")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.abandoned_branch_records == 0


def test_cycle_blocks_the_plan(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    first = b.user("a")
    last = b.say("b")[-1]
    first["parentUuid"] = last["uuid"]
    plan = plan_of(b, make_config())
    assert "loops" in plan.report.blocked_reason
