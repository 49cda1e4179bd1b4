"""Bounded memory of the candidate (spec §3): writing and verifying hold one record at a time.

The plan keeps digests and offsets; the words, the records and the manifest items must not all
be held at once, or a session of a million messages needs gigabytes (issue 8). The figures for
whole sessions are in `benchmarks/bench_memory.py`; here the writer's own allocations are traced.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from kael_thread_rebuild.candidate.verifier import verify_candidate
from kael_thread_rebuild.candidate.writer import write_candidate
from kael_thread_rebuild.conversation.records import Origin, Role, Speech, SpeechStore
from kael_thread_rebuild.plan import build_plan
from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import plan_of, source_path

MIB = 1 << 20


def _chat(messages: int) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for index in range(messages // 2):
        b.user(f"question {index}: is the build green yet?")
        b.say(f"answer {index}: yes, all {index} checks passed.")
    return b


def test_writing_a_candidate_does_not_hold_the_session(make_config: ConfigFactory,
                                                       tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_chat(20_000), config)
    assert plan.report.carried_speech_items == 20_000
    tracemalloc.start()
    try:
        result = write_candidate(plan, tmp_path, config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.verification.ok, result.verification.errors
    assert result.items == 20_000
    size = result.candidate_path.stat().st_size + result.manifest_path.stat().st_size
    assert size > 15 * MIB
    # Holding the records or the manifest items costs tens of MiB at this size.
    assert peak < 8 * MIB, f"write_candidate allocated {peak / MIB:.1f} MiB at its peak"


def test_verification_reports_unreadable_files_instead_of_raising(make_config: ConfigFactory,
                                                                  tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_chat(40), config)
    result = write_candidate(plan, tmp_path, config)
    manifest = result.manifest_path.read_bytes()
    result.manifest_path.write_bytes(manifest[: len(manifest) // 2])  # cut inside the items
    cut = verify_candidate(result.candidate_path, result.manifest_path, plan)
    assert not cut.ok and cut.errors[0].startswith("manifest unreadable"), cut.errors

    result.manifest_path.write_bytes(manifest)
    assert verify_candidate(result.candidate_path, result.manifest_path, plan).ok
    result.candidate_path.unlink()
    gone = verify_candidate(result.candidate_path, result.manifest_path, plan)
    assert gone.errors == [f"cannot read {result.candidate_path}: No such file or directory"]


def test_a_plan_keeps_a_few_bytes_per_message(make_config: ConfigFactory) -> None:
    """A million-message session must plan in 200 MiB (issue 8): one Python object per record
    (uuid strings, dicts, tuples, hex digests) costs over a kilobyte a message; flat arrays
    cost about 90 bytes (counts in two bytes until one needs more, row maps that are the
    identity until a uuid comes twice, uuids as 16 bytes with no offsets). The peak includes
    the reader's and the digest's buffers (5 MiB, 170 bytes a message at this size)."""
    config = make_config()
    messages = 30_000
    builder = _chat(messages)
    builder.write(source_path(config, builder))
    tracemalloc.start()
    try:
        plan = build_plan(config, source_path(config, builder), parallel=False)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan.report.source_speech_items == messages
    assert plan.report.selected_turns == messages // 2
    per_message = peak / messages
    assert per_message < 400, f"build_plan peaked at {per_message:.0f} bytes a message"
    assert held / messages < 100, f"the plan holds {held / messages:.0f} bytes a message"


def test_saving_the_scan_cache_does_not_copy_the_table(make_config: ConfigFactory) -> None:
    """Pickling the scan for the state dir's cache (and for a forked reader's pipe) writes each
    array from its own bytes: the standard pickling copies every array into a bytes object it
    keeps to the end, a third more at the peak."""
    config = make_config()
    messages = 30_000
    builder = _chat(messages)
    path = builder.write(source_path(config, builder))
    config.state_dir.mkdir(parents=True, exist_ok=True)
    peaks = []
    for cached in (False, True):
        tracemalloc.start()
        try:
            plan = build_plan(config, path, parallel=False, cached=cached)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert plan.report.source_speech_items == messages
    assert list(config.layout.scan_cache.iterdir()), "no scan was cached"
    assert peaks[1] < 1.1 * peaks[0], f"saving the scan peaked at {peaks[1] / MIB:.1f} MiB " \
        f"against {peaks[0] / MIB:.1f} MiB without it"


def test_a_line_of_many_megabytes_is_read_whole_and_a_torn_one_flagged(
        make_config: ConfigFactory) -> None:
    """Lines longer than the reader's long-line mark are measured, then read in one piece:
    the same records and runtime bytes, and a torn last line is still a write in progress."""
    config = make_config()
    output = "build log line ✓ \"quoted\"\n" * (400_000)  # about 11 MB, over the mark
    b = TranscriptBuilder()
    b.user("run the build")
    b.tool_call("Bash", output, text="running it")
    b.say("the build is green")
    plan = plan_of(b, config)
    assert plan.report.source_speech_items == 3
    assert plan.report.dirty.categories["tool_result"] == len(output.encode())
    assert not plan.report.torn_final_line

    path = source_path(config, b)
    with path.open("ab") as handle:
        handle.write(b'{"type":"user","content":"' + b"x" * (12 * MIB))  # no newline yet
    torn = build_plan(config, path, parallel=False)
    assert torn.report.torn_final_line
    assert torn.report.source_bytes == path.stat().st_size
    assert torn.report.dirty == plan.report.dirty


def test_speech_counts_widen_past_two_gigabytes() -> None:
    """Counts are kept in 16 bits until one needs more, then in 64 (a merged reader too)."""
    said = (Speech(Role.user, "hello", Origin.terminal),)
    first, huge = SpeechStore(), SpeechStore()
    first.add(0, None, float("nan"), 0, 100, said)
    huge.add(0, None, float("nan"), 200, 3 << 30, said)  # not where the first line ends
    assert first.lengths is None and huge.length_of(0) == 3 << 30
    first.absorb(huge, 1)
    assert first.lengths is not None and first.lengths.typecode == "q"
    assert list(first.lengths) == [100, 3 << 30] and list(first.offsets) == [0, 200]
    assert list(first.utf8_bytes) == [5, 5] and list(first.rows) == [0, 1]
