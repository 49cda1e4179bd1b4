"""The stream-json parser, on lines as Kimi Code 2.1.0 writes them."""

from __future__ import annotations

from kael_advisor.stream import Transcript

LINES = [
    '{"role":"meta","type":"system.version","version":"2.1.0"}',
    '{"role":"assistant","content":"reading","tool_calls":[{"type":"function","id":"call_1",'
    '"function":{"name":"Glob","arguments":"{\\"pattern\\":\\"src/**/*.py\\"}"}}]}',
    '{"role":"tool","tool_call_id":"call_1","content":"src/a.py"}',
    '{"role":"meta","type":"turn.step.retrying","attempt":1}',
    '{"role":"assistant","content":[{"type":"text","text":"the answer"}]}',
    '{"role":"tool","tool_call_id":"call_2","content":"Tool \\"Write\\" not found"}',
    "not json at all",
    '{"role":"meta","type":"session.resume_hint","session_id":"session_abc",'
    '"command":"kimi -r session_abc"}',
]


def test_the_answer_the_tools_the_retries_and_the_session() -> None:
    transcript = Transcript()
    for line in LINES:
        transcript.feed(line.encode())

    assert transcript.answer == "reading\n\nthe answer"
    assert transcript.tools == ["Glob(src/**/*.py)"]
    assert (transcript.retries, transcript.failed_tools) == (1, 1)
    assert transcript.session_id == "session_abc"
    assert transcript.lines == len(LINES) and transcript.spoke


def test_meta_lines_alone_are_not_speech() -> None:
    transcript = Transcript()
    transcript.feed(LINES[0])

    assert not transcript.spoke and transcript.answer == ""


def test_long_arguments_are_shortened() -> None:
    transcript = Transcript()
    transcript.feed('{"role":"assistant","content":"","tool_calls":[{"id":"c","function":'
                    '{"name":"Read","arguments":"{\\"path\\":\\"' + "x" * 300 + '\\"}"}}]}')

    assert len(transcript.tools[0]) < 100 and transcript.tools[0].endswith("…)")
