"""A large transcript read by two processes gives exactly the plan of a single reader."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.conversation import handoff as handoff_module
from kael_thread_rebuild.conversation import scan as scan_module
from kael_thread_rebuild.plan import build_plan
from kael_thread_rebuild.transcript import reader as reader_module
from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory


def _busy_session() -> TranscriptBuilder:
    b = TranscriptBuilder()
    for number in range(60):
        b.user(f"question {number} 问题")
        b.attachment("date", "<system-reminder>today</system-reminder>")
        if number % 7 == 0:
            b.parallel_tools([f"out {number}", "more"], text=f"checking {number}")
        else:
            b.tool_call("Bash", "x" * 2000, text=f"running {number}")
        b.say(f"answer {number}")
        if number % 13 == 0:
            b.speech_tool(f"phone message {number}")
    return b


@pytest.mark.usefixtures("single_threaded")
@pytest.mark.parametrize("damage", ["none", "unreadable", "repeated_uuid", "torn_tail"])
def test_split_read_equals_single_read(damage: str, make_config: ConfigFactory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = make_config()
    b = _busy_session()
    path = b.write(config.project_dir / f"{b.session_id}.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "unreadable":
        lines.insert(len(lines) * 3 // 4, b"{broken\n")
    elif damage == "repeated_uuid":
        lines.append(lines[len(lines) // 4])  # a later copy of an early record wins
    elif damage == "torn_tail":
        lines.append(b'{"type":"user","message":{"content":"half')
    path.write_bytes(b"".join(lines))

    single = build_plan(config, path, parallel=False)
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    forks = []
    real_second_half = scan_module._second_half

    def counted(*args: object) -> tuple[int, int]:
        forks.append(args)
        return real_second_half(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(scan_module, "_second_half", counted)
    split = build_plan(config, path, parallel=True)
    assert len(forks) == 1
    assert split.report == single.report
    assert [t.items for t in split.turns] == [t.items for t in single.turns]
    assert single.report.source_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    if damage == "unreadable":
        assert single.report.unreadable_lines == [len(lines) * 3 // 4 + 1]


@pytest.mark.usefixtures("single_threaded")
@pytest.mark.parametrize("damage", ["none", "unreadable", "repeated_uuid", "torn_tail"])
def test_the_end_of_the_childs_part_read_by_the_parent_gives_the_same_plan(
        damage: str, make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent done first reads the end of the child's part, half of what the child has left
    each time it asks (`handoff`): its parts follow each other back from the end, and make the
    plan of a single reader, the damaged lines where they were."""
    config = make_config()
    b = _busy_session()
    path = b.write(config.project_dir / f"{b.session_id}.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    broken = len(lines) * 7 // 8
    if damage == "unreadable":
        lines.insert(broken, b"{broken\n")
    elif damage == "repeated_uuid":
        lines.append(lines[len(lines) // 4])
    elif damage == "torn_tail":
        lines.append(b'{"type":"user","message":{"content":"half')
    path.write_bytes(b"".join(lines))
    single = build_plan(config, path, parallel=False)

    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(reader_module, "HANDOFF_STEP", 1)  # the child asks at every line
    monkeypatch.setattr(handoff_module, "LEAST_HANDED_OVER", 1)
    answer_first = handoff_module.ChildHandoff.end_at

    def waiting(self: handoff_module.ChildHandoff, next_line: int, end: int) -> int:
        """The child waits for the parent's request: a small file would be read before it."""
        if self.requests is not None:
            os.set_blocking(self.requests, True)
        return answer_first(self, next_line, end)

    monkeypatch.setattr(handoff_module.ChildHandoff, "end_at", waiting)
    parts: list[tuple[int, int]] = []  # this process's parts (the child's is its own)
    classify = scan_module._classify_range

    def counted(fd: int, start: int, length: int, *rest: Any, **named: Any) -> Any:
        parts.append((start, length))
        return classify(fd, start, length, *rest, **named)

    monkeypatch.setattr(scan_module, "_classify_range", counted)
    split = build_plan(config, path, parallel=True)
    size = path.stat().st_size
    (first, first_length), *taken = parts
    assert first == 0 and len(taken) >= 2  # the child asked at every line: asked again
    ends = [size] + [start for start, _ in taken[:-1]]
    assert [start + length for start, length in taken] == ends
    assert first_length < min(ends) and all(ends[n] > ends[n + 1] for n in range(len(ends) - 1))
    data = path.read_bytes()
    assert all(data[start - 1:start] == b"\n" for start, _ in taken)
    assert split.report == single.report
    assert [t.items for t in split.turns] == [t.items for t in single.turns]
    if damage == "unreadable":
        assert split.report.unreadable_lines == [broken + 1]


@contextlib.contextmanager
def _handoff(path: Path) -> Iterator[tuple[handoff_module.ChildHandoff, int, int]]:
    """A child's side of a handoff over PATH, and the parent's ends (request, answer)."""
    with path.open("rb") as handle:
        pipes = handoff_module.Pipes.open()
        child = handoff_module.ChildHandoff(handle.fileno(), pipes.request_read,
                                            pipes.answer_write)
        try:
            yield child, pipes.request_write, pipes.answer_read
        finally:
            child.close()
            os.close(pipes.request_write)
            os.close(pipes.answer_read)


def test_a_child_done_reading_keeps_its_part(tmp_path: Path) -> None:
    """Asked once it has read all of its part, or with too little left, the child answers no,
    and the parent reads nothing more."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n' * 1000)
    with _handoff(path) as (child, requests, answers):
        assert child.end_at(0, 8000) == 8000  # nothing asked yet
        child.close()
        assert handoff_module.ask_for_rest(requests, answers) is None
    with _handoff(path) as (child, requests, answers):
        os.write(requests, b"?")
        assert child.end_at(7992, 8000) == 8000  # one line left: not worth a second reader
        assert os.read(answers, 8) == bytes(8)


def test_the_child_hands_over_from_a_line_start_about_halfway(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff_module, "LEAST_HANDED_OVER", 1000)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n' * 1000)
    with _handoff(path) as (child, requests, answers):
        os.write(requests, b"?")
        assert child.end_at(4003, 8000) == 6008  # the next line start
        assert int.from_bytes(os.read(answers, 8), "little") == 6008
        assert child.end_at(5000, 6008) == 6008  # one request, one answer
        os.write(requests, b"?")  # asked again: half of what is left again
        assert child.end_at(2000, 6008) == 4008
        assert int.from_bytes(os.read(answers, 8), "little") == 4008
        os.write(requests, b"?")  # too little left: no, and no more
        assert child.end_at(3504, 4008) == 4008
        assert os.read(answers, 8) == bytes(8)
        assert handoff_module.ask_for_rest(requests, answers) is None


def test_split_point_is_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n' * 1000)
    with path.open("rb") as handle:
        point = scan_module._split_point(handle, path.stat().st_size)
    assert point is not None and point % 8 == 0 and 0 < point < 8000


def test_no_fork_while_other_threads_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module.threading, "active_count", lambda: 2)
    assert not scan_module._can_fork(1 << 40, None)
    monkeypatch.setattr(scan_module.threading, "active_count", lambda: 1)
    assert scan_module._can_fork(1 << 40, None) == ((scan_module.os.cpu_count() or 1) >= 2)
    assert not scan_module._can_fork(1 << 40, False)


@pytest.mark.usefixtures("single_threaded")
def test_cli_starts_reading_before_the_engine_is_imported(
        make_config: ConfigFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kael_thread_rebuild.interfaces import prestart as prestart_module

    config = make_config()
    b = _busy_session()
    path = b.write(config.project_dir / f"{b.session_id}.jsonl")
    config_file = tmp_path / "c.toml"
    config_file.write_text(f'project_dir = "{config.project_dir}"\n')
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    started = prestart_module.prestart(["--config", str(config_file), "plan"])
    assert started is not None and started.path == path.resolve()
    assert 0 < started.start < started.size
    plan = build_plan(config, path, started=started)
    assert started.finished
    assert plan.report == build_plan(config, path, parallel=False).report

    other = prestart_module.prestart(["--config", str(config_file), "plan"])
    assert other is not None
    changed = make_config(speech_tool_pattern=["mcp__other__say"])
    assert build_plan(changed, path, started=other).report == build_plan(
        changed, path, parallel=False).report  # a child read with other patterns is not used
    assert other.finished

    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(path.read_bytes())
    assert prestart_module.prestart(
        ["--config", str(config_file), "plan", "--transcript", str(outside)]) is None
    assert prestart_module.prestart(["--config", str(config_file), "status"]) is None


@pytest.mark.usefixtures("single_threaded")
def test_a_forked_reader_is_refused_by_chain_records_not_by_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose lines are mostly bookkeeping (no uuid) is read by two processes however
    many lines it has; one as dense in chain records as a chat is read by one."""
    if (scan_module.os.cpu_count() or 1) < 2:
        pytest.skip("one core: the scan never forks")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan_module, "PARALLEL_MAX_RECORDS", 500)
    bookkeeping = b'{"type":"last-prompt","lastPrompt":"go on","sessionId":"s"}\n'
    spoken = b'{"type":"user","uuid":"%08d-0000-4000-8000-000000000000","message":' \
             b'{"role":"user","content":"hello"}}\n'
    mostly_bookkeeping = tmp_path / "busy.jsonl"
    mostly_bookkeeping.write_bytes(
        b"".join(bookkeeping * 9 + spoken % number for number in range(400)))
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(b"".join(spoken % number for number in range(600)))
    rules = scan_module.SpeechRules()

    forks: list[Path] = []  # what BEFORE_FORK saw (the command line pads the heap there)
    started = scan_module.start_second_half(mostly_bookkeeping, rules,
                                            before_fork=lambda: forks.append(mostly_bookkeeping))
    assert started is not None  # 4,000 lines, 400 records
    started.cancel()
    assert scan_module.start_second_half(chat, rules,
                                         before_fork=lambda: forks.append(chat)) is None
    assert forks == [mostly_bookkeeping]  # 600 lines, 600 records: read by one, as it was

    # Another writer's spacing must not make a dense chat look empty (the estimate may count
    # too many records, never too few).
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_bytes(chat.read_bytes().replace(b'"uuid":', b'"uuid" : '))
    assert scan_module.start_second_half(spaced, rules,
                                         before_fork=lambda: forks.append(spaced)) is None
    assert forks == [mostly_bookkeeping]
