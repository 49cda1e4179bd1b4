"""A byte range read through a mapping (`transcript.mapped_file`): the same lines and bytes a
read gives, from any offset and across steps; long lines not held; and a file cut shorter while
it is read is an error, never the SIGBUS that kills the process."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kael_thread_rebuild.transcript import digest_turns, mapped_file
from kael_thread_rebuild.transcript.mapped_file import FileShrank, mapped_chunks, mapped_lines
from kael_thread_rebuild.transcript.reader import FileDigest

MIB = 1 << 20


Line = tuple[int, int, bytes | None, bool]


def _lines(path: Path, start: int, length: int, longest: int) -> list[Line]:
    with path.open("rb") as handle:
        return [(offset, size, None if view is None else bytes(view), complete)
                for offset, size, view, complete in mapped_lines(handle.fileno(), start, length,
                                                                 longest)]


def _expected(data: bytes, start: int, length: int, longest: int) -> list[Line]:
    found: list[Line] = []
    position, end = start, start + length
    while position < end:
        newline = data.find(b"\n", position, end)
        if newline < 0:
            found.append((position, end - position, None, False))
            break
        line = data[position:newline + 1]
        found.append((position, len(line), None if len(line) > longest else line, True))
        position = newline + 1
    return found


@pytest.fixture
def varied(tmp_path: Path) -> tuple[Path, bytes]:
    """Lines of every length from empty to several steps, the last one without a newline."""
    rows = [b"", b"x", b"y" * 4095, b"z" * 4096, b"w" * 9000, b"\xe6\x97\xa5" * 3000, b"v" * 30000]
    data = b"".join(row + b"\n" for row in rows * 3) + b"torn"
    path = tmp_path / "varied.jsonl"
    path.write_bytes(data)
    return path, data


@pytest.mark.parametrize("start", [0, 1, 4095, 4096, 12289, 50000])
def test_the_lines_are_those_a_read_gives_from_any_offset(
        varied: tuple[Path, bytes], start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    path, data = varied
    monkeypatch.setattr(mapped_file, "STEP", 8192)  # lines cross many steps
    for length in (len(data) - start, (len(data) - start) // 2):
        assert _lines(path, start, length, 10000) == _expected(data, start, length, 10000)


def test_an_empty_range_has_no_lines(varied: tuple[Path, bytes]) -> None:
    path, data = varied
    assert _lines(path, len(data), 0, 100) == []


def test_a_long_line_is_measured_without_being_held(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "long.jsonl"
    with path.open("wb") as out:
        out.write(b"short\n")
        for _ in range(64):
            out.write(b"a" * MIB)
        out.write(b"\nafter\n")
    monkeypatch.setattr(mapped_file, "STEP", MIB)
    with path.open("rb") as handle:
        lines = mapped_lines(handle.fileno(), 0, path.stat().st_size, 8 * MIB)
        assert next(lines)[1:] == (6, b"short\n", True)
        before = _mapped_file_kib()
        offset, size, view, complete = next(lines)
        held = _mapped_file_kib() - before
        assert (offset, size, view, complete) == (6, 64 * MIB + 1, None, True)
        assert held < 4 * 1024, f"{held} KiB of a 64 MiB line held"
        assert bytes(next(lines)[2] or b"") == b"after\n"


def test_lines_read_through_keep_no_more_of_the_file_mapped_than_a_step(tmp_path: Path) -> None:
    """Each line's bytes are read after they were found (parsed): a page let go of before
    that would be mapped again for good; and a huge page would be held whole."""
    path = tmp_path / "many.jsonl"
    row = b'{"type":"user","text":"' + b"t" * 2900 + b'"}\n'
    with path.open("wb") as out:
        for _ in range(64):
            out.write(row * (MIB // len(row)))
    _cached_as_read(path)
    most = 0
    with path.open("rb") as handle:
        before = _mapped_file_kib()
        for number, (_, _, view, _) in enumerate(mapped_lines(handle.fileno(), 0,
                                                              path.stat().st_size, 8 * MIB)):
            assert view is not None and bytes(view) == row
            if number % 500 == 0:
                most = max(most, _mapped_file_kib() - before)
    assert most < 3 * 1024, f"{most} KiB of a 64 MiB file held"


def _cached_as_read(path: Path) -> None:
    """PATH's pages in the page cache as a read puts them there (in large folios where the
    kernel makes them, as for a transcript read before), not as they were written."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, MIB):
            pass
    finally:
        os.close(fd)


def _mapped_file_kib() -> int:
    """The file pages this process has mapped (RssFile), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_the_chunks_are_the_bytes_and_digest_as_a_read_does(varied: tuple[Path, bytes],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path, data = varied
    monkeypatch.setattr(mapped_file, "STEP", 8192)
    with path.open("rb") as handle:
        for start in (0, 5, 8192, len(data) - 3):
            chunks = [bytes(chunk) for chunk in mapped_chunks(handle.fileno(), start,
                                                              len(data) - start)]
            assert b"".join(chunks) == data[start:]
            assert all(len(chunk) <= 8192 for chunk in chunks)
        for resumable in (False, True):
            digest = FileDigest(handle.fileno(), len(data), resumable=resumable)
            assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


# Read the first lines of a 16 MiB file, cut it to 1 MiB, read on: an error, or a signal.
CUT_WHILE_READ = """
import os, sys
from kael_thread_rebuild.transcript.mapped_file import FileShrank, mapped_chunks, mapped_lines
path, how = sys.argv[1], sys.argv[2]
with open(path, "rb") as handle:
    items = (mapped_lines(handle.fileno(), 0, 16 << 20, 1 << 30) if how == "lines"
             else mapped_chunks(handle.fileno(), 0, 16 << 20))
    next(items)
    os.truncate(path, 1 << 20)
    try:
        for item in items:
            bytes(item[2] if how == "lines" else item)
    except FileShrank as exc:
        print("refused:", exc)
"""


@pytest.mark.parametrize("how", ["lines", "chunks"])
def test_a_file_cut_shorter_while_it_is_read_is_an_error_not_a_crash(tmp_path: Path,
                                                                    how: str) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_bytes((b"q" * 1023 + b"\n") * (16 * 1024))
    done = subprocess.run([sys.executable, "-c", CUT_WHILE_READ, str(path), how],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"ended by signal {-done.returncode}: {done.stderr}"
    assert "refused: " in done.stdout and "cut to 1048576 bytes" in done.stdout


# Address space for the interpreter as it is and 16 MiB more, then a 64 MiB range mapped.
ADDRESS_SPACE_LIMITED = """
import resource, sys
from kael_thread_rebuild.transcript.mapped_file import mapped_lines
size = next(int(line.split()[1]) for line in open("/proc/self/status")
            if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (16 << 20), resource.RLIM_INFINITY))
with open(sys.argv[1], "rb") as handle:
    try:
        next(mapped_lines(handle.fileno(), 0, 64 << 20, 1 << 20))
    except OSError as exc:
        print("refused:", exc.strerror)
"""


def test_a_range_too_large_for_the_address_space_says_so(tmp_path: Path) -> None:
    path = tmp_path / "large.jsonl"
    path.write_bytes((b"p" * 1023 + b"\n") * (64 * 1024))
    done = subprocess.run([sys.executable, "-c", ADDRESS_SPACE_LIMITED, str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused: no address space to map the 67108864 bytes" in done.stdout
    assert "ulimit -v" in done.stdout


def test_a_digest_of_a_file_cut_shorter_fails(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b"r" * (4 * MIB))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.truncate(path, MIB)
        with pytest.raises(FileShrank):
            FileDigest(fd, 4 * MIB).hexdigest()
    finally:
        os.close(fd)


def test_the_gil_is_handed_over_often_while_a_digest_runs_and_as_usual_after(
        tmp_path: Path) -> None:
    """The reader holds the GIL nearly always; the digest thread beside it gets it every
    millisecond, not every 5 (`digest_turns`), and only while one runs."""
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"s" * (256 * MIB))
    usual = 0.004
    sys.setswitchinterval(usual)
    try:
        with path.open("rb") as handle:
            short = FileDigest(handle.fileno(), MIB)
            long = FileDigest(handle.fileno(), 256 * MIB, resumable=True)
            assert sys.getswitchinterval() == digest_turns.DIGEST_SWITCH_INTERVAL
            short.hexdigest()
            assert sys.getswitchinterval() == digest_turns.DIGEST_SWITCH_INTERVAL
            long.hexdigest()
        assert sys.getswitchinterval() == usual
    finally:
        sys.setswitchinterval(0.005)
