"""The stability samples around the backup: the copy counts as the first sample, and the next
one is due an interval after it, however the time in between was spent (planning the copy)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from kael_thread_rebuild.operations.files import copy_sampled, sample_file, wait_stable


def test_the_copy_is_a_sample_of_the_source(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    source.write_bytes(b'{"type":"user"}\n' * 1000)
    copy, taken = copy_sampled(source, tmp_path / "backup.jsonl")
    assert copy == sample_file(source)
    assert taken <= time.monotonic()
    assert (tmp_path / "backup.jsonl").read_bytes() == source.read_bytes()


def test_the_next_sample_is_due_an_interval_after_the_first(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    source.write_bytes(b"{}\n")
    first, taken = copy_sampled(source, tmp_path / "backup.jsonl")
    slept: list[float] = []
    stable = wait_stable(source, 2, 10.0, 60.0, slept.append, first=(first, taken - 9.5))
    assert stable == first
    assert len(slept) == 1 and 0.0 <= slept[0] <= 0.5  # 9.5 of the 10 s had gone by
    slept.clear()
    wait_stable(source, 2, 10.0, 60.0, slept.append, first=(first, taken - 20.0))
    assert slept == [0.0]


def test_a_source_written_after_the_copy_is_not_stable_with_it(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    source.write_bytes(b"{}\n")
    first, taken = copy_sampled(source, tmp_path / "backup.jsonl")
    with source.open("ab") as handle:
        handle.write(b"{}\n")

    def sleep(_: float) -> None:
        time.sleep(0.01)

    stable = wait_stable(source, 2, 0.0, 5.0, sleep, first=(first, taken))
    assert stable != first and stable == sample_file(source)


def test_a_copy_of_a_file_that_changed_meanwhile_equals_no_sample(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    source.write_bytes(b"{}\n")
    first, taken = copy_sampled(source, tmp_path / "backup.jsonl")
    unreadable = replace(first, sha256="")  # what a copy during a write gives
    slept: list[float] = []
    stable = wait_stable(source, 2, 0.0, 5.0, slept.append, first=(unreadable, taken))
    assert stable == first
    assert len(slept) == 2  # two samples of its own: the copy did not count
