"""What counts as conversation (spec §4-§5): every real word carried, every trace dropped."""

from __future__ import annotations

from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, plan_of


def test_plain_turns_with_tool_noise_carry_only_speech(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("Please look at the logs, 你好 🙂")
    b.first_turn_attachments()
    b.tool_call("Bash", "x" * 50_000, text="Reading them now.")
    b.thinking()
    b.say("The logs show two restarts.\n\nDetails follow.  ")
    b.system()
    b.bookkeeping()
    b.user("Thanks — and the second one?")
    b.tool_call("Read", "y" * 10_000)
    b.say("It was at 03:00.")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.source_turns == 2
    assert plan.report.blocked_reason == ""
    assert plan.report.dirty.categories["tool_result"] == 60_000


def test_consecutive_user_messages_form_one_turn(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    for text in ("one", "two", "three", "four"):
        b.user(text)
        b.attachment("queued_command_hint")
    b.say("All four read.")
    plan = plan_of(b, make_config())
    assert plan.report.source_turns == 1
    assert plan.texts(plan.turns[0].user) == ["one", "two", "three", "four"]


def test_injected_blocks_are_stripped_and_the_rest_kept_verbatim(
        make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("<system-reminder>\nmemory index\n</system-reminder>\nmy real words  here",
           expect=False)
    b.expected.append(("user", "my real words  here"))
    b.say("ok")
    b.user("<command-name>/compact</command-name>\n<command-message>compact</command-message>\n"
           "<command-args></command-args>", expect=False)
    b.user("<local-command-stdout>Compacted</local-command-stdout>", expect=False)
    b.user("[Request interrupted by user for tool use]", expect=False)
    # The same tags inside a line are the user's own words (spec §4): carried verbatim.
    b.user("before <task-notification>agent report</task-notification> after")
    b.say("done")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.dirty.categories["injected_block"] > 0


def test_meta_records_are_runtime_but_channel_messages_are_speech(
        make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("start")
    b.say("hi")
    b.meta_user("Stop hook feedback:\ncontinue please")
    channel = ('<channel source="telegram" chat_id="42" user="me" ts="2026-11-01T08:00:00Z">\n'
               "晚上好，还记得我们昨天说的吗？\n</channel>")
    b.meta_user(channel, expect=True)
    b.say("当然记得。")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.speech_by_origin["channel"] == 1
    assert plan.report.dirty.categories["meta_injection"] > 0


def test_speech_tool_text_is_assistant_speech(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.meta_user('<channel source="companion" chat_id="1">are you there?</channel>', expect=True)
    b.speech_tool("I am here. 我在。")
    b.speech_tool("Second line", name="mcp__plugin_telegram_telegram__reply")
    b.tool_call("mcp__companion__react", "ok", arguments={"emoji": "👍", "text": "not speech"})
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.speech_by_origin["speech_tool"] == 2


def test_custom_speech_tool_pattern(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.speech_tool("via slack", name="mcp__slack__post")
    plan = plan_of(b, make_config(speech_tool_pattern=["mcp__slack__post"]))
    assert carried(plan) == b.expected


def test_old_format_queued_input_lands_exactly_once(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("first")
    b.bookkeeping("queue-operation", operation="enqueue", content="typed while busy")
    b.add(b._envelope("attachment", attachment={
        "type": "queued_command", "prompt": "typed while busy", "commandMode": "prompt"}))
    b.expected.append(("user", "typed while busy"))
    b.bookkeeping("queue-operation", operation="remove", content="typed while busy")
    b.add(b._envelope("attachment", attachment={
        "type": "queued_command", "prompt": "/clear", "commandMode": "bash"}))
    b.say("answering both")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.speech_by_origin["queued"] == 1


def test_api_errors_synthetic_and_sidechains_are_not_speech(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("question")
    b.assistant({"type": "text", "text": "API Error: overloaded"}, isApiErrorMessage=True)
    b.assistant({"type": "text", "text": "No response requested."}, model="<synthetic>")
    side = b._envelope("user", message={"role": "user", "content": "subagent prompt"})
    side["isSidechain"] = True
    b.add(side, link=False)
    b.say("real answer")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected


def test_assistant_words_before_the_first_user_message_are_dropped(
        make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.assistant({"type": "text", "text": "orphan greeting"})
    b.expected.clear()
    b.user("hello")
    b.say("hi")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.dropped_leading_assistant_items == 1


def test_open_tail_is_kept_by_default_and_can_be_left_out(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("one")
    b.say("reply")
    b.user("unanswered question")
    b.tool_call("Bash", "output")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.open_tail_turns == 1 and plan.report.open_tail_carried
    without = plan_of(b, make_config(include_open_tail=False))
    assert carried(without) == b.expected[:-1]
    assert without.report.dropped_open_tail_items == 1


def test_compact_summary_and_the_turns_before_it_are_carried(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("before compaction")
    b.say("noted")
    boundary = b._envelope("system", parent=None, subtype="compact_boundary",
                           logicalParentUuid="phantom-uuid-not-in-file")
    boundary["parentUuid"] = None
    b.add(boundary)
    b.user("This session is being continued… summary text", isCompactSummary=True,
           isVisibleInTranscriptOnly=True)
    b.user("<command-name>/compact</command-name>", expect=False)
    b.user("after compaction")
    b.say("still here")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.speech_by_origin["compact_summary"] == 1


def test_user_pasted_image_is_runtime_and_its_words_are_kept(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.image("what is in this picture?")
    b.say("A small square.")
    plan = plan_of(b, make_config())
    assert carried(plan) == b.expected
    assert plan.report.dirty.categories["image"] > 0
    assert not plan.report.dirty.viewed_original_image
