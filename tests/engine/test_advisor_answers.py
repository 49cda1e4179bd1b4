"""The advisor's finished answers are speech on every path of the scan.

The transcript is real: Claude Code 2.1.328 consulting the real Kimi Code CLI through the
advisor's MCP server (`tests/advisor/test_rebuild.py` makes such transcripts; this one is kept,
its temporary paths replaced by `/home/user/...` and its `api-request-blob` copies of the system
prompt left out). It holds a task's creation, two consultations, their running polls and two
finished answers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.candidate.writer import write_candidate
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.conversation import scan as scan_module
from kael_thread_rebuild.conversation.records import Origin, Role
from kael_thread_rebuild.conversation.scan import start_second_half
from kael_thread_rebuild.plan import Plan, build_plan, speech_rules
from kael_thread_rebuild.transcript.reader import LONG_LINE
from tests.conftest import ConfigFactory

FIXTURE = Path(__file__).parents[1] / "fixtures" / "advisor" / "consult-twice.jsonl"
LONG_ADVICE = "\n".join(f"{n}. 先加锁 — take the lock, then re-read the table ({n})"
                        for n in range(1, 40))
ANSWERS = ["✅ consultation #t1 (5 s):\n\nfirst advice: start with the lock",
           f"✅ consultation #t2 (4 s):\n\n{LONG_ADVICE}"]


def _copy(config: Config) -> Path:
    path = config.project_dir / FIXTURE.name
    shutil.copyfile(FIXTURE, path)
    return path


def _answers(plan: Plan) -> list[str]:
    return [text for item, text in zip(plan.items, plan.texts(), strict=True)
            if item.origin is Origin.advisor_answer]


def _outcome(plan: Plan) -> tuple[object, list[tuple[object, ...]], list[str]]:
    return plan.report, [tuple(item) for item in plan.items], plan.texts()


def test_the_finished_answers_are_assistant_speech_and_the_rest_runtime(
        make_config: ConfigFactory) -> None:
    config = make_config()
    plan = build_plan(config, _copy(config), parallel=False)
    assert _answers(plan) == ANSWERS
    assert plan.report.speech_by_origin["advisor_answer"] == 2
    answers = [item for item in plan.items if item.origin is Origin.advisor_answer]
    assert {item.role for item in answers} == {Role.assistant}
    assert plan.report.source_turns == 1  # the answers sit inside the assistant's turn
    words = "\n".join(text for text in plan.texts() if not text.startswith("RESULTS"))
    for runtime in ("consultation started", "still thinking", "📌 task"):
        assert runtime not in words


def test_without_the_rule_the_answers_are_runtime(make_config: ConfigFactory) -> None:
    config = make_config(answer_tool_pattern=[])
    plan = build_plan(config, _copy(config), parallel=False)
    assert _answers(plan) == [] and plan.report.speech_by_origin["advisor_answer"] == 0


def _line_starts(path: Path, *needles: bytes) -> list[int]:
    starts, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        if all(needle in line for needle in needles):
            starts.append(offset)
        offset += len(line)
    return starts


@pytest.mark.usefixtures("single_threaded")
@pytest.mark.parametrize("answer_tools", [None, ["mcp__other__poll"], []],
                         ids=["advisor", "another-tool", "no-rule"])
def test_a_split_read_equals_a_single_read_wherever_it_splits(
        answer_tools: list[str] | None, make_config: ConfigFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The second reader does not see the call a result answers when the split falls between
    them: a finished answer there is confirmed by the first part; an answer-shaped result of a
    call the rule does not name makes the scan read the file again (no rule: nothing to
    confirm)."""
    config = make_config() if answer_tools is None else make_config(
        answer_tool_pattern=answer_tools)
    path = _copy(config)
    single = _outcome(build_plan(config, path, parallel=False))
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    size = path.stat().st_size
    results = _line_starts(path, "✅ consultation #".encode(), b'"type":"tool_result"')
    calls = _line_starts(path, b'"name":"mcp__advisor-mcp__advisor_poll"')
    assert len(results) == 2
    reads: list[int] = []
    classify = scan_module._classify_range

    def counted(*args: Any, **named: Any) -> Any:
        reads.append(args[1])
        return classify(*args, **named)

    monkeypatch.setattr(scan_module, "_classify_range", counted)
    for start in [*results, calls[0], calls[-1]]:
        reads.clear()
        started = start_second_half(path, speech_rules(config), parallel=True,
                                    fraction=(start - 0.5) / size)
        assert started is not None and started.start == start
        assert _outcome(build_plan(config, path, started=started)) == single
        # This process read the first part, and the whole file again only after a misread.
        misread = bool(answer_tools)
        assert reads == ([0, 0] if misread else [0]), (start, reads)


def test_the_scan_cache_keeps_the_calls_a_later_result_answers(
        make_config: ConfigFactory) -> None:
    """A cached scan that ends between a poll and its answer takes the answer up later."""
    config = make_config()
    path = config.project_dir / FIXTURE.name
    whole = FIXTURE.read_bytes()
    cut = _line_starts(FIXTURE, "✅ consultation #t2".encode())[0]
    path.write_bytes(whole[:cut])
    assert _answers(build_plan(config, path, cached=True)) == ANSWERS[:1]
    with path.open("ab") as handle:
        handle.write(whole[cut:])
    resumed = build_plan(config, path, cached=True)
    assert _outcome(resumed) == _outcome(build_plan(config, path, parallel=False))
    assert _answers(resumed) == ANSWERS


def test_the_candidate_carries_them_and_a_rebuild_of_it_too(
        make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    plan = build_plan(config, _copy(config), parallel=False)
    out = tmp_path / "out"
    out.mkdir()
    made = write_candidate(plan, out, config)
    assert made.verification.ok, made.verification.errors
    again = build_plan(config, made.candidate_path, parallel=False)
    assert _answers(again) == ANSWERS
    assert again.texts() == plan.texts()


def test_an_answer_on_a_long_line_is_read_whole_on_every_path(
        make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line past the reader's long-line size keeps its long strings undecoded: the answer's
    is decoded, by the reader that knows its call and by the one that assumes it."""
    config = make_config()
    path = config.project_dir / FIXTURE.name
    huge = "✅ consultation #t2 (4 s):\n\n" + "长" * (3 << 20)  # 9 MiB of UTF-8
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines)
              if b'"type":"tool_result"' in line and b"#t2 (4 s)" in line)
    record = json.loads(lines[at])
    record["message"]["content"][0]["content"] = json.dumps({"result": huge},
                                                            ensure_ascii=False)
    lines[at] = json.dumps(record, ensure_ascii=False).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    assert len(lines[at]) > LONG_LINE
    single = build_plan(config, path, parallel=False)
    assert _answers(single) == [ANSWERS[0], huge]
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    start = sum(len(line) for line in lines[:at])
    started = start_second_half(path, speech_rules(config), parallel=True,
                                fraction=(start - 0.5) / path.stat().st_size)
    assert started is not None and started.start == start
    assert _outcome(build_plan(config, path, started=started)) == _outcome(single)
