"""Startup snapshot (§6), budget (§10), dirty ledger and poison (§9)."""

from __future__ import annotations

import hashlib
import re
import sys

from kael_thread_rebuild.conversation.tokens import CJK_RANGES, count_cjk, estimate_tokens
from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, plan_of

CLAUDE_MD = "<system-reminder>\nContents of CLAUDE.md: always answer in haiku\n</system-reminder>"


def test_first_turn_memory_attachment_is_frozen_once(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.first_turn_attachments()
    b.attachment("nested_memory", CLAUDE_MD)
    b.say("hi")
    b.user("again")
    b.attachment("nested_memory", CLAUDE_MD)  # a later re-read is runtime, not a second copy
    b.say("hi again")
    plan = plan_of(b, make_config())
    assert plan.snapshot is not None
    assert plan.snapshot.text == CLAUDE_MD
    assert plan.report.startup_frozen
    assert plan.report.startup_sha256 == hashlib.sha256(CLAUDE_MD.encode()).hexdigest()
    assert carried(plan) == b.expected


def test_old_format_snapshot_in_the_first_user_record(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user(f"{CLAUDE_MD}\nWhat's on today?", expect=False)
    b.expected.append(("user", "What's on today?"))
    b.say("Nothing planned.")
    plan = plan_of(b, make_config())
    assert plan.snapshot is not None and plan.snapshot.text == CLAUDE_MD
    assert carried(plan) == b.expected


def test_regenerated_listings_are_not_a_snapshot(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.first_turn_attachments()
    b.say("hi")
    plan = plan_of(b, make_config())
    assert plan.snapshot is None and not plan.report.startup_frozen


def test_snapshot_can_be_switched_off(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.attachment("nested_memory", CLAUDE_MD)
    b.say("hi")
    assert plan_of(b, make_config(freeze_startup_snapshot=False)).snapshot is None


def test_token_estimate_counts_cjk_and_other_characters() -> None:
    assert estimate_tokens("你好世界", 1.5) == int(4 * 1.1)
    assert estimate_tokens("abcdef", 1.5) == 4
    assert estimate_tokens("한국어 text", 2.0) == int(3 * 1.1 + 5 / 2.0)
    assert count_cjk("你好，世界（全角）！\ufff0\u4dc0\ud7b0\ud800\U00020000") == 10


def test_every_character_is_counted_as_cjk_exactly_when_a_range_holds_it() -> None:
    """Every code point one by one (lone surrogates included), then all of them in one text,
    against the ranges as a pattern class."""
    ranges = "".join(f"{chr(first)}-{chr(last)}" for first, last in CJK_RANGES)
    pattern = re.compile(f"[{ranges}]")
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    assert [point for point in range(sys.maxunicode + 1)
            if count_cjk(chr(point)) != len(pattern.findall(chr(point)))] == []
    assert count_cjk(everything) == len(pattern.findall(everything)) == sum(
        last - first + 1 for first, last in CJK_RANGES)


def _long_conversation(turns: int) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for number in range(turns):
        b.user(f"question {number} " + "words " * 500)
        b.say(f"answer {number} " + "reply " * 500)
    return b


def test_drop_oldest_drops_whole_turns_and_counts_them(make_config: ConfigFactory) -> None:
    b = _long_conversation(10)
    plan = plan_of(b, make_config(carry_max_tokens=10_000))
    report = plan.report
    assert report.dropped_oldest_turns > 0
    assert report.selected_turns == 10 - report.dropped_oldest_turns
    assert report.estimated_tokens <= 10_000
    assert carried(plan) == b.expected[2 * report.dropped_oldest_turns:]
    assert report.blocked_reason == ""


def test_the_last_turn_is_always_kept(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("x " * 20_000)
    b.say("y")
    plan = plan_of(b, make_config(carry_max_tokens=5000))
    assert plan.report.selected_turns == 1 and plan.report.overflow_tokens > 0


def test_block_overflow_refuses_and_drops_nothing(make_config: ConfigFactory) -> None:
    b = _long_conversation(10)
    plan = plan_of(b, make_config(carry_max_tokens=10_000, carry_overflow="block"))
    assert plan.report.overflow_blocked and plan.report.dropped_oldest_turns == 0
    assert "over budget" in plan.report.blocked_reason


def test_dirty_budget_and_image_view_trigger_a_rebuild(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("read the screenshot")
    b.add(b._envelope("user", message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}]}))
    b.say("I see it.")
    dirty = plan_of(b, make_config()).report.dirty
    assert dirty.viewed_original_image and dirty.should_rebuild
    assert dirty.reasons == ["the model viewed an original image"]

    quiet = plan_of(b, make_config(rebuild_on_original_image_view=False)).report.dirty
    assert not quiet.should_rebuild

    noisy = TranscriptBuilder()
    noisy.user("big output please")
    noisy.tool_call("Bash", "z" * 600_000)
    noisy.say("done")
    report = plan_of(noisy, make_config()).report.dirty
    assert report.should_rebuild and report.total_bytes >= 512 * 1024
    assert report.conversation_bytes == len("big output please") + len("done")
    assert report.noise_ratio > 0.99


def test_poisoned_context_blocks_with_a_reason(make_config: ConfigFactory) -> None:
    b = TranscriptBuilder()
    b.user("why did it stop?")
    b.say("That request was a policy violation under the Acceptable Use policy.")
    plan = plan_of(b, make_config())
    assert plan.report.poison_score == 2
    assert plan.report.blocked_reason.startswith("poisoned context")
    calm = plan_of(b, make_config(poison_pattern="nothing-matches-this"))
    assert calm.report.blocked_reason == ""
