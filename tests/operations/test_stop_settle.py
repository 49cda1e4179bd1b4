"""The worker waits for Claude Code to finish the Stop it was scheduled by.

Claude Code writes the Stop's `stop_hook_summary` (and, interactively, `turn_duration`) only after
every Stop hook returned; a hook slowed by `docker exec` under load returns seconds after it
recorded the Stop, so the worker must not take its stability samples before that. And a new
session's transcript can appear only after its first Stop hook returned.
"""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import orjson

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service, worker
from kael_thread_rebuild.operations.files import stop_summary_written
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.transcript.reader import LONG_LINE
from tests.builder import SESSION, TranscriptBuilder

from .harness import SECRET, HarnessBase, scheduled, stop_input

MIB = 1 << 20

S = OperationStatus
LATE = 0.6  # seconds between the Stop being recorded and Claude Code closing it


def _turn_without_summary() -> TranscriptBuilder:
    """A transcript as it is while the Stop hook runs: the last reply is written, the
    `stop_hook_summary` is not (yet)."""
    builder = TranscriptBuilder()
    builder.first_turn_attachments()
    builder.user(f"hello, {SECRET}")
    builder.say("I looked.")
    builder.bookkeeping("last-prompt")
    return builder


def _stop_closed_records(builder: TranscriptBuilder) -> bytes:
    """What Claude Code 2.1.328 writes once the hook returned (interactive order):
    `stop_hook_summary`, `turn_duration`, `cost-state`."""
    first = len(builder.records)
    builder.system("stop_hook_summary")
    builder.system("turn_duration")
    builder.bookkeeping("cost-state")
    return b"".join(orjson.dumps(record) + b"\n" for record in builder.records[first:])


def _append_later(path: Path, data: bytes) -> threading.Timer:
    def append() -> None:
        with path.open("ab") as handle:
            handle.write(data)
    timer = threading.Timer(LATE, append)
    timer.start()
    return timer


def _run(config: Config, store: OperationStore, base: HarnessBase, op: Operation,
         started: threading.Timer | None = None) -> Operation:
    try:
        return worker.run_operation(config, store, base, op.operation_id)
    finally:
        if started is not None:
            started.join()


def test_summary_written_after_the_hook_returned(config: Config, store: OperationStore,
                                                 base: HarnessBase) -> None:
    """The Stop is recorded, the hook process returns LATE s later, then Claude Code writes
    the summary: the worker copies the transcript with it, and the switch happens."""
    builder = _turn_without_summary()
    source = builder.write(config.project_dir / f"{SESSION}.jsonl")
    op = scheduled(config, base)
    timer = _append_later(source, _stop_closed_records(builder))
    done = _run(config, store, base, op, timer)
    assert done.status is S.activated, done.error
    assert base.pointer() == done.new_session_id
    assert Path(done.backup_path or "").read_bytes() == source.read_bytes()
    assert b"turn_duration" in source.read_bytes()
    assert SECRET in Path(done.candidate_path or "").read_text()


def test_stop_never_recorded(config: Config, store: OperationStore, base: HarnessBase) -> None:
    """A hook that never returns (or a session that went on): nothing is switched, and the
    error says what the worker waited for and which key bounds it."""
    config = config.model_copy(update={"stop_settle_timeout_seconds": 0.3})
    source = _turn_without_summary().write(config.project_dir / f"{SESSION}.jsonl")
    before = source.read_bytes()
    done = _run(config, store, base, scheduled(config, base))
    assert done.status is S.failed, done
    assert "stop_hook_summary" in (done.error or "")
    assert "stop_settle_timeout_seconds" in (done.error or "")
    assert base.switches() == [] and base.pointer() == SESSION
    assert source.read_bytes() == before


def test_transcript_created_after_the_stop(config: Config, store: OperationStore,
                                           base: HarnessBase) -> None:
    """The Stop names a transcript Claude Code creates only after the hook returned."""
    builder = _turn_without_summary()
    whole = b"".join(orjson.dumps(record) + b"\n" for record in builder.records)
    whole += _stop_closed_records(builder)
    source = config.project_dir / f"{SESSION}.jsonl"
    service.request(config, "test rebuild", "REBUILD")
    op = service.record_stop(config, stop_input(config))
    assert op is not None and op.status is S.scheduled, op
    timer = threading.Timer(LATE, source.write_bytes, (whole,))
    timer.start()
    done = _run(config, store, base, op, timer)
    assert done.status is S.activated, done.error
    assert Path(done.backup_path or "").read_bytes() == whole


def test_transcript_never_created(config: Config, store: OperationStore,
                                  base: HarnessBase) -> None:
    config = config.model_copy(update={"stop_settle_timeout_seconds": 0.3})
    service.request(config, "test rebuild", "REBUILD")
    op = service.record_stop(config, stop_input(config))
    assert op is not None and op.status is S.scheduled, op
    done = _run(config, store, base, op)
    assert done.status is S.failed
    assert f"{SESSION}.jsonl named by the Stop did not appear within 0.3 s" in (done.error or "")
    assert base.switches() == []


def test_summary_found_from_the_end(tmp_path: Path) -> None:
    """The check reads lines from the end: a reply longer than a read chunk, an unterminated
    line being written, and a later turn without its summary are all told apart."""
    builder = TranscriptBuilder()
    builder.user("question")
    builder.say("y" * (3 << 20))
    path = builder.write(tmp_path / "t.jsonl")
    assert not stop_summary_written(path)
    data = _stop_closed_records(builder)
    with path.open("ab") as handle:
        handle.write(data + b'{"type":"system","subtype":"stop_hook_sum')
    assert stop_summary_written(path)
    builder.user("and the next turn")
    with path.open("ab") as handle:
        handle.write(b"mary\"}\n" + orjson.dumps(builder.records[-1]) + b"\n")
    assert not stop_summary_written(path)


def test_a_long_last_line_is_held_once_not_decoded(tmp_path: Path) -> None:
    """While a turn runs, the last complete line can be a command's output of hundreds of MB:
    the check holds that line once and reads it by its skeleton (issue 8: the worker streams),
    not joined from its pieces and decoded whole (three times its size)."""
    output = "compiling ✓ \"module\" \\ step\n" * 500_000  # about 15 MB of output
    builder = TranscriptBuilder()
    builder.user("print the build log")
    builder.tool_call("Bash", output, text="here it comes")
    path = builder.write(tmp_path / "t.jsonl")
    last = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    assert b'"tool_result"' in last and len(last) > 2 * LONG_LINE
    tracemalloc.start()
    try:
        closed = stop_summary_written(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not closed
    assert peak < len(last) + 10 * MIB, f"peak {peak / MIB:.1f} MiB, line {len(last) / MIB:.1f} MiB"
    with path.open("ab") as handle:
        handle.write(_stop_closed_records(builder))
    assert stop_summary_written(path)
