"""Property tests: any interleaving of speech and runtime records carries exactly the speech."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kael_thread_rebuild.candidate.writer import write_candidate
from kael_thread_rebuild.config import parse_config
from kael_thread_rebuild.plan import build_plan
from tests.builder import TranscriptBuilder

NOISE = "RUNTIME-NOISE"

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_text = st.text(alphabet=st.characters(blacklist_characters="<"), min_size=1, max_size=40)
# Lone surrogates included, often: Node writes them (a string cut inside an emoji), never a pair.
_cut = st.builds(lambda head, lone, tail: head + lone + tail, _text,
                 st.sampled_from(["\ud83d", "\ude00", "\udcff"]), _text)
words = st.one_of(_text, _cut).filter(
    lambda text: bool(text.strip()) and NOISE not in text
    and not text.lstrip().startswith("[Request interrupted") and not _PAIR.search(text))

ACTIONS = ("user", "say", "tool", "parallel", "thinking", "attachment", "system", "bookkeeping",
           "meta", "injected", "typed_tag", "speech_tool", "channel", "image", "api_error")
steps = st.lists(st.tuples(st.sampled_from(ACTIONS), words), min_size=1, max_size=30)


def _build(plan_steps: list[tuple[str, str]]) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for action, text in plan_steps:
        if action == "user":
            b.user(text)
        elif action == "say":
            b.say(text)
        elif action == "tool":
            b.tool_call("Bash", f"{NOISE} output")
        elif action == "parallel":
            b.parallel_tools([f"{NOISE} 1", f"{NOISE} 2"])
        elif action == "thinking":
            b.thinking(f"{NOISE} thought")
        elif action == "attachment":
            b.attachment("date", f"<system-reminder>{NOISE} date</system-reminder>")
        elif action == "system":
            b.system()
        elif action == "bookkeeping":
            b.bookkeeping("api-request", body=NOISE)
        elif action == "meta":
            b.meta_user(f"{NOISE} meta injection")
        elif action == "injected":
            b.user(f"<system-reminder>{NOISE}</system-reminder>\n{text}", expect=False)
            # The white space that followed a removed block goes with it (see injected.py).
            b.expected.append(("user", text.lstrip()))
        elif action == "typed_tag":  # the user's own words, tags and all (spec §4)
            b.user(f"{text} <system-reminder>{text}</system-reminder> {text}")
        elif action == "speech_tool":
            b.speech_tool(text)
        elif action == "channel":
            b.meta_user(f'<channel source="telegram" chat_id="7">{text}</channel>', expect=True)
        elif action == "image":
            b.image(text)
        elif action == "api_error":
            b.assistant({"type": "text", "text": f"{NOISE} API Error"}, isApiErrorMessage=True)
    return b


def _expected(b: TranscriptBuilder) -> list[tuple[str, str]]:
    """The scenario's speech, minus assistant words before the first user message."""
    first_user = next((i for i, (role, _) in enumerate(b.expected) if role == "user"), None)
    return [] if first_user is None else b.expected[first_user:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_carried_speech_equals_source_speech_and_no_runtime_is_carried(
        plan_steps: list[tuple[str, str]]) -> None:
    b = _build(plan_steps)
    expected = _expected(b)
    with tempfile.TemporaryDirectory() as temp:
        project = Path(temp)
        config = parse_config({"project_dir": temp, "poison_pattern": "[^\\s\\S]",
                               "freeze_startup_snapshot": False})
        source = b.write(project / f"{b.session_id}.jsonl")
        plan = build_plan(config, source)
        carried = [(item.role.value, text)
                   for item, text in zip(plan.items, plan.texts(), strict=True)]
        assert carried == expected
        if not expected:
            assert plan.report.blocked_reason == "there is no conversation to carry"
            return
        result = write_candidate(plan, project, config)
        assert result.verification.ok, result.verification.errors
        body = result.candidate_path.read_text()
        assert NOISE not in body
        for block in ('"tool_use"', '"tool_result"', '"thinking"', '"image"'):
            assert block not in body
        result.manifest_path.unlink()
        again = build_plan(config, result.candidate_path)
        assert [(i.role.value, text)
                for i, text in zip(again.items, again.texts(), strict=True)] == carried
