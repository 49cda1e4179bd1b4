"""One pass over a transcript: every record classified, runtime bytes tallied, file digested.

A large file is split at a line boundary and its later part read by a forked child on the
other core, so that the plan costs little more than parsing the file once; this process, done
with its part first, reads the end of the child's too (`handoff`). The SHA-256 is taken by a
thread over the same bytes. Everything is read as of the size the file had when
the scan started: a record appended meanwhile belongs to the next scan.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from ..errors import InputError
from ..transcript.reader import (
    READ_BUFFER,
    FileDigest,
    Handoff,
    ReadStats,
    next_line_start,
    read_records,
)
from .array_pickle import dump_arrays
from .handoff import ChildHandoff, Pipes, ask_for_rest
from .heap import map_large_blocks
from .records import Classifier, SpeechRules

PARALLEL_MIN_BYTES = 64 << 20
# The part of a forked scan this process reads. It also digests the whole file (a thread:
# about a fifth of the CPU that reading every line takes), so it takes less than half; a little
# less still, so that it is done first: then it reads the end of the child's part too
# (`handoff`), however the machine shares its cores between them.
PARENT_SHARE = 0.38
# A file of very many chain records is read by one process: a forked reader's table and its
# trip through the pipe would hold them twice (a million-message chat: 200 MiB more). Records,
# not lines: a line without a uuid (the bookkeeping of most of a session's lines) costs the
# table nothing (benchmarks/README.md, "Figures: issue 26, a forked reader by records").
PARALLEL_MAX_RECORDS = 200_000
DENSITY_PROBE_BYTES = 4 << 20
# What a chain record has and a bookkeeping line has not (counted, not searched by a pattern,
# which took 5-8 ms of the start). Without the colon, so that no spacing counts too few; a
# nested key or a value "uuid" only counts too many.
_RECORD_KEY = b'"uuid"'


@dataclass(slots=True)
class Scan:
    read: Classifier
    stats: ReadStats
    sha256: str
    tally: dict[str, int] = field(default_factory=dict)


#: Called with the scanned file still open (its descriptor), the scan and its digest.
AfterScan = Callable[[int, Scan, FileDigest], None]


Part = tuple[Classifier, dict[str, int], ReadStats]


def _classify_range(fd: int, start: int, length: int, rules: SpeechRules,
                    handoff: Handoff | None = None, *, records: int = 0) -> Part:
    """What a classifier reads of [START, START + LENGTH); RECORDS: about how many records
    its table will hold in the end (0: unknown), for it to grow once instead of step by step."""
    map_large_blocks()
    read = Classifier(rules, from_start=start == 0)
    read.table.reserve(records)
    tally: dict[str, int] = {}
    stats = ReadStats()
    read.classify_all(read_records(fd, start, length, stats, settle=read.settle,
                                   handoff=handoff), tally)
    return read, tally, stats


def _split_point(handle: BinaryIO, size: int, fraction: float = 0.5) -> int | None:
    """The offset just after the first newline at or past FRACTION of the file, if any."""
    point = next_line_start(handle.fileno(), int(size * fraction), size)
    return point if point is not None and point < size else None


def _records_in(handle: BinaryIO, size: int) -> int:
    """About how many chain records the file holds, judged by their density in its first
    megabytes."""
    handle.seek(0)
    sample = handle.read(DENSITY_PROBE_BYTES)
    return sample.count(_RECORD_KEY) * size // len(sample) if sample else 0


def _can_fork(size: int, parallel: bool | None) -> bool:
    if parallel is False or size < PARALLEL_MIN_BYTES or (os.cpu_count() or 1) < 2:
        return False
    # Forking a process that runs other threads can leave their locks held in the child.
    return threading.active_count() == 1 and hasattr(os, "fork")


def _read_child(reader: int) -> object:
    """The child's result, unpickled straight from the pipe (never held twice as bytes)."""
    with os.fdopen(reader, "rb", buffering=READ_BUFFER) as pipe:
        return pickle.load(pipe)


def _second_half(path: Path, fd: int, start: int, size: int, rules: SpeechRules,
                 records: int) -> tuple[int, int, tuple[int, int]]:
    """Fork a child that classifies [START, SIZE) and pipes back the pickled result, and hands
    the end of its range over when asked (`handoff`): its pid, the result pipe, and the
    parent's ends of the handoff's pipes. RECORDS: about how many the whole file holds.

    The child opens the file the parent has open (through /proc, so a rename in between cannot
    swap it) with its own offset.
    """
    reader, writer = os.pipe()
    pipes = Pipes.open()
    same_file = Path(f"/proc/self/fd/{fd}")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(reader)
            requests, answers = pipes.child_side()
            with same_file.open("rb", buffering=READ_BUFFER) as handle:
                handoff = ChildHandoff(handle.fileno(), requests, answers)
                try:
                    result: object = _classify_range(
                        handle.fileno(), start, size - start, rules, handoff,
                        records=records * (size - start) // size)
                finally:
                    handoff.close()  # before the result fills the pipe: see `handoff`
        except BaseException as exc:
            result = OSError(str(exc))
            code = 1
        try:
            with os.fdopen(writer, "wb", buffering=READ_BUFFER) as pipe:
                dump_arrays(result, pipe)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(writer)
    return pid, reader, pipes.parent_side()


@dataclass(slots=True)
class SecondHalf:
    """A forked child classifying [start, size) of an open file, joined by `scan`."""

    path: Path
    rules: SpeechRules
    handle: BinaryIO
    size: int
    start: int
    pid: int
    reader: int
    handoff: tuple[int, int]
    # About how many chain records the file holds (at most PARALLEL_MAX_RECORDS).
    records: int
    finished: bool = False

    def take_rest(self) -> int | None:
        """Where this process reads on from, up to where the part it took last begins (the
        first time: the end), the child having stopped there; None when the child keeps what
        it has left, and from then on (see `handoff`)."""
        taken = None
        try:
            if self.handoff[0] >= 0:
                taken = ask_for_rest(*self.handoff)
        finally:
            if taken is None:
                self._close_handoff()
        return taken

    def _close_handoff(self) -> None:
        for end in self.handoff:
            with contextlib.suppress(OSError):
                os.close(end)
        self.handoff = (-1, -1)

    def collect(self) -> Part:
        later: object
        try:
            later = _read_child(self.reader)
        except (EOFError, pickle.UnpicklingError) as exc:
            later = OSError(f"the reader of the second part stopped: {exc}")
        os.waitpid(self.pid, 0)
        self.finished = True
        self._close_handoff()
        if isinstance(later, BaseException):
            raise InputError(f"cannot read {self.path}: {later}")
        return cast(Part, later)

    def cancel(self) -> None:
        """Stop the child and let go of the file (the plan was not made after all)."""
        if self.finished:
            return
        self.finished = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.reader)
        self._close_handoff()
        self.handle.close()


def _append(scanned: Scan, later: Part) -> None:
    """Add to SCANNED what was read of the part right after its own."""
    later_read, later_tally, later_stats = later
    scanned.read.absorb(later_read, scanned.stats.lines)
    tally = scanned.tally
    for category, amount in later_tally.items():
        tally[category] = tally.get(category, 0) + amount
    scanned.stats.absorb(later_stats)


def start_second_half(path: Path, rules: SpeechRules, *, parallel: bool | None = None,
                      fraction: float = PARENT_SHARE,
                      before_fork: Callable[[], object] | None = None) -> SecondHalf | None:
    """Fork a child for the part of PATH after FRACTION, when the file is large enough and
    forking is safe; None otherwise (or when the file cannot be opened: `scan` reports it).
    BEFORE_FORK: called once the child is sure to start, for both processes to inherit."""
    try:
        handle = path.open("rb", buffering=READ_BUFFER)
    except OSError:
        return None
    size = os.fstat(handle.fileno()).st_size
    split, records = None, 0
    if _can_fork(size, parallel):
        records = _records_in(handle, size)
        if parallel or records <= PARALLEL_MAX_RECORDS:
            split = _split_point(handle, size, fraction)
    if split is None:
        handle.close()
        return None
    if before_fork is not None:
        before_fork()
    records = min(records, PARALLEL_MAX_RECORDS)
    pid, reader, handoff = _second_half(path, handle.fileno(), split, size, rules, records)
    return SecondHalf(path.resolve(), rules, handle, size, split, pid, reader, handoff, records)


def _classified(path: Path, fd: int, size: int, split: int | None,
                rules: SpeechRules, started: SecondHalf | None) -> Scan:
    """The records of PATH classified: up to SPLIT here, the rest by STARTED (the end of its
    part read here too, a half at a time, while this process is done first: `handoff`); read
    again whole when a later part took an answer for one that was not (see
    `Classifier.absorb`)."""
    rests: list[Part] = []  # the parts handed over, the last first
    try:
        # This process's table takes in every part: it is made for the whole file's records.
        read, tally, stats = _classify_range(fd, 0, split or size, rules,
                                             records=started.records if started else 0)
        end = size
        while started is not None and (taken := started.take_rest()) is not None:
            rests.append(_classify_range(fd, taken, end - taken, rules,
                                         records=started.records * (end - taken) // size))
            end = taken
    except OSError as exc:
        if started is not None:
            started.cancel()
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    scanned = Scan(read, stats, "", tally)
    if started is not None:
        _append(scanned, started.collect())
    for rest in reversed(rests):
        _append(scanned, rest)
    if scanned.read.misread_answers:
        try:
            read, tally, stats = _classify_range(fd, 0, size, rules)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        scanned = Scan(read, stats, "", tally)
    return scanned


def scan(path: Path, rules: SpeechRules, *, parallel: bool | None = None,
         started: SecondHalf | None = None, resumable: bool = False,
         then: AfterScan | None = None) -> Scan:
    """Classify every record of PATH. STARTED: a child already reading PATH's second part
    with the same speech rules (see `interfaces.prestart`); any other is cancelled.
    RESUMABLE: keep the digest's states (see `FileDigest`); THEN: see `AfterScan`."""
    if started is not None and (started.path != path.resolve() or started.rules != rules):
        started.cancel()
        started = None
    if started is None and parallel is not False:
        started = start_second_half(path, rules, parallel=parallel)
    if started is not None:
        handle, size, split = started.handle, started.size, started.start
    else:
        try:
            handle = path.open("rb", buffering=READ_BUFFER)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        size, split = os.fstat(handle.fileno()).st_size, None
    with handle:
        digest = FileDigest(handle.fileno(), size, resumable=resumable)
        scanned = _classified(path, handle.fileno(), size, split, rules, started)
        scanned.sha256 = digest.hexdigest()
        if then is not None:
            then(handle.fileno(), scanned, digest)
        return scanned
