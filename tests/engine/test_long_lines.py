"""Long lines (spec §3, issue 8): a line of hundreds of megabytes is planned in about its own
size, its long strings measured in pieces rather than decoded; the plan is the same as a whole
parse gives, surrogates, escapes and invalid bytes included."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.plan import build_plan
from kael_thread_rebuild.transcript import reader, scanner, skeleton
from kael_thread_rebuild.transcript.json_text import dumps_line, loads_line, text_bytes
from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, source_path

MIB = 1 << 20


def test_a_long_tool_result_is_measured_not_decoded(make_config: ConfigFactory) -> None:
    """Decoding a 26 MB line costs its bytes plus its strings (over twice its size); measuring
    its long strings a piece at a time costs its bytes and a few MiB (a piece being decoded,
    the digest's read buffer)."""
    config = make_config()
    output = "compiling ✓ \"module\" \\ step\n" * 400_000  # about 12 MB, twice in the line
    b = TranscriptBuilder()
    b.user("print the build log")
    b.tool_call("Bash", output, text="here it comes")
    b.say("the build is green")
    path = b.write(source_path(config, b))
    line = max(len(raw) for raw in path.read_bytes().splitlines())
    assert line > 2 * reader.LONG_LINE
    tracemalloc.start()
    try:
        plan = build_plan(config, path, parallel=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan.report.dirty.categories["tool_result"] == len(output.encode())
    assert carried(plan) == b.expected
    assert peak < line + 10 * MIB, f"peak {peak / MIB:.1f} MiB for a {line / MIB:.1f} MiB line"


CUT_HIGH, CUT_LOW = "\ud83d", "\ude00"  # written as Node writes them: lone surrogate escapes


def _rich_transcript() -> TranscriptBuilder:
    """Every place a long string can be: speech, tool results (string and blocks), tool input,
    a speech tool's text, thinking, images, attachments, system content, unknown fields, a key;
    with escapes, CJK, emoji, lone surrogates and control characters in them."""
    mixed = ("line \"q\" \\ tab\t é 雪 😀 " + CUT_HIGH + " x " + CUT_LOW + " \x01\n") * 9
    b = TranscriptBuilder()
    b.first_turn_attachments()
    b.user("first words " + mixed)
    b.tool_call("Bash", mixed, text="running " + mixed, arguments={"command": mixed})
    b.thinking(mixed)
    b.speech_tool("reply " + mixed)
    b.image("look " + mixed)
    b.attachment("nested_memory", "<system-reminder>" + mixed + "</system-reminder>")
    b.add(b._envelope("user", message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x",
         "content": [{"type": "text", "text": mixed},
                     {"type": "image", "source": {"type": "base64", "data": mixed}}]}]}))
    b.add(b._envelope("system", subtype="local_command", content=[mixed, {"k": mixed}]))
    b.add(b._envelope("user", message={"role": "user", "content": "key " + mixed},
                      extra={mixed: mixed}, toolUseResult={"stdout": mixed}))
    b.expected.append(("user", "key " + mixed))
    b.add(b._envelope("attachment", attachment={"type": "queued_command", "prompt": mixed,
                                                "content": mixed}))
    b.expected.append(("user", mixed))
    b.add(b._envelope("assistant", isSidechain=True, message={
        "id": "msg_side", "role": "assistant", "content": [{"type": "text", "text": mixed}]}))
    b.say("done " + mixed)
    return b


def _bad_lines(path: Path) -> None:
    """Append lines a whole parse refuses, with the fault inside a long string."""
    body = b"abcdefghij" * 30
    with path.open("ab") as handle:
        handle.write(b'{"type":"user","x":"' + body + b'\\q' + body + b'"}\n')
        handle.write(b'{"type":"user","x":"' + body + b"\x01" + body + b'"}\n')
        handle.write(b'{"type":"user","x":"' + body + b"\xff" + body + b'"}\n')
        handle.write(b'{"type":"user","x":"' + body + b'\\ud83d' + body + b'"')
        handle.write(b' "y"}\n')


def _planned(config: Config, path: Path) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    plan = build_plan(config, path, parallel=False)
    return plan.report.model_dump(), carried(plan)


@pytest.mark.parametrize("found_by_scanner", [True, False], ids=["scanner", "pieces"])
def test_long_lines_plan_as_a_whole_parse_does(make_config: ConfigFactory,
                                               monkeypatch: pytest.MonkeyPatch,
                                               found_by_scanner: bool) -> None:
    """With the marks made tiny, nearly every line is long and every string is cut into many
    pieces (inside escapes' reach, beside surrogates, within UTF-8): the same plan, whether the
    long strings are found by the scanner (as where it runs compiled) or piece by piece."""
    monkeypatch.setattr(scanner, "COMPILED", found_by_scanner)
    config = make_config()
    b = _rich_transcript()
    path = b.write(source_path(config, b))
    _bad_lines(path)
    whole = _planned(config, path)
    assert whole[1] == b.expected
    assert len(whole[0]["unreadable_lines"]) == 4
    monkeypatch.setattr(reader, "LONG_LINE", 200)
    monkeypatch.setattr(skeleton, "BIG_STRING", 8)
    monkeypatch.setattr(skeleton, "DECODE_CHUNK", 16)
    assert _planned(config, path) == whole


_TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(
    ["\\", '"', "\n", "\x00", "\x1f", "\ud83d", "\ude00", "😀", "雪", "é", "/"])), max_size=60)
_VALUE = st.recursive(st.one_of(_TEXT, st.integers(-(2**63), 2**63 - 1), st.none(),
                                st.booleans()),
                      lambda inner: st.one_of(st.lists(inner, max_size=4),
                                              st.dictionaries(_TEXT, inner, max_size=4)),
                      max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(_TEXT, _VALUE, max_size=5), big=st.integers(1, 12),
       chunk=st.integers(1, 24))
def test_a_line_read_by_its_skeleton_is_the_line(tmp_path_factory: pytest.TempPathFactory,
                                                 value: dict[str, Any], big: int,
                                                 chunk: int) -> None:
    """Any JSON object, as Node writes it (lone surrogates as escapes), with every string of
    BIG bytes or more cut out and decoded CHUNK bytes at a time: the same value, and each long
    string measured as a whole parse measures it."""
    raw = dumps_line(value)
    path = tmp_path_factory.mktemp("line") / "line.json"
    path.write_bytes(raw)
    with pytest.MonkeyPatch.context() as patch, path.open("rb") as handle:
        patch.setattr(skeleton, "BIG_STRING", big)
        patch.setattr(skeleton, "DECODE_CHUNK", chunk)
        read = skeleton.loads_long_line(raw, handle.fileno(), 0)
        assert skeleton.json_size(read) == len(raw)
        bigs: list[skeleton.BigText] = []

        def note(item: Any) -> Any:
            if isinstance(item, skeleton.BigText):
                bigs.append(item)
            return item

        skeleton._swap_leaves(read, note)
        assert bigs or not any(isinstance(v, str) and len(v) >= big for v in value.values())
        for text in bigs:
            decoded = text.text()
            assert text.utf8_bytes == len(text_bytes(decoded))
            assert text.json_bytes == len(dumps_line(decoded))
        assert skeleton.materialize(read) == loads_line(raw) == value
        # a line of 2 GiB or more is read as a bytearray (never copied to bytes)
        from_bytearray = skeleton.loads_long_line(bytearray(raw), handle.fileno(), 0)
        assert skeleton.json_size(from_bytearray) == len(raw)
        assert skeleton.materialize(from_bytearray) == value
