"""The scan cache: a plan taken up from the state dir's cache equals a full scan, whatever the
file went through (appends, torn tails, truncations, same-size rewrites, replacements), and a
cache that is damaged, foreign or unsafe is ignored, never an error."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kael_thread_rebuild.config import Config, parse_config
from kael_thread_rebuild.conversation import scan as scan_module
from kael_thread_rebuild.conversation import scan_cache
from kael_thread_rebuild.errors import InputError
from kael_thread_rebuild.interfaces.prestart import prestart
from kael_thread_rebuild.plan import build_plan, scan_cache_dir, speech_rules
from tests.conftest import ConfigFactory
from tests.engine.test_properties import _build, steps

OPS = ("append", "torn", "finish", "truncate", "rewrite", "replace", "garbage", "repeat")
GROWING = ("append", "finish", "garbage", "repeat")
ops = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1 << 20)), min_size=1,
               max_size=8)


def _outcome(config: Config, path: Path, cached: bool) -> object:
    """Everything a plan says, or the error it stops with."""
    try:
        plan = build_plan(config, path, parallel=False, cached=cached)
    except InputError as exc:
        return str(exc)
    return plan.report, [turn.items for turn in plan.turns]


def _entry_matches(config: Config, path: Path) -> bool:
    """Whether the cache holds an entry that the file at PATH takes up (before a scan)."""
    cache_dir = scan_cache_dir(config)
    assert cache_dir is not None
    with path.open("rb") as handle:
        status = os.fstat(handle.fileno())
        key = scan_cache._key(status, speech_rules(config))
        entry = scan_cache.entry_path(cache_dir, path)
        return scan_cache._load(entry, key, handle.fileno(), status.st_size) is not None


class _File:
    """The transcript under test and the lines still to be appended to it."""

    def __init__(self, path: Path, lines: list[bytes], first: int) -> None:
        self.path = path
        self.pool = lines
        self.next = first
        self.torn = b""
        path.write_bytes(b"".join(lines[:first]))

    def _line(self) -> bytes:
        line = self.pool[self.next % len(self.pool)]
        self.next += 1
        return line

    def _append(self, data: bytes) -> None:
        with self.path.open("ab") as handle:
            handle.write(data)

    def apply(self, op: str, number: int) -> None:
        size = self.path.stat().st_size
        if op == "append":
            self._append(b"".join(self._line() for _ in range(1 + number % 3)))
        elif op == "torn":
            line = self._line()
            cut = 1 + number % (len(line) - 1)
            self._append(line[:cut])
            self.torn = line[cut:]
        elif op == "finish":
            self._append(self.torn or self._line())
            self.torn = b""
        elif op == "truncate":
            os.truncate(self.path, number % (size + 1))
        elif op == "rewrite" and size:
            self._rewrite(number % size)
        elif op == "replace":
            data = self.path.read_bytes()
            fresh = self.path.with_suffix(".new")
            fresh.write_bytes(data[: number % (len(data) + 1)] + self._line())
            fresh.replace(self.path)  # a new inode
        elif op == "garbage":
            self._append(b"{broken\n")
        elif op == "repeat":  # a record written again: the later copy wins
            self._append(self.pool[number % len(self.pool)])

    def _rewrite(self, at: int) -> None:
        """The same size, one byte changed in place (the inode kept)."""
        with self.path.open("r+b") as handle:
            handle.seek(at)
            old = handle.read(1)
            new = b"x" if old != b"x" else b"y"
            handle.seek(at)
            handle.write(new)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, ops, st.integers(0, 1 << 16))
def test_a_plan_taken_up_from_the_cache_equals_a_full_scan(
        plan_steps: list[tuple[str, str]], changes: list[tuple[str, int]], first: int) -> None:
    b = _build(plan_steps)
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "state").mkdir()
        config = parse_config({"project_dir": temp, "state_dir": str(root / "state"),
                               "poison_pattern": "[^\\s\\S]"})
        lines = b.write(root / "whole.jsonl").read_bytes().splitlines(keepends=True)
        source = _File(root / f"{b.session_id}.jsonl", lines, first % (len(lines) + 1))
        assert _outcome(config, source.path, True) == _outcome(config, source.path, False)
        for op, number in changes:
            scanned_a_line = b"\n" in source.path.read_bytes()
            source.apply(op, number)
            if op in GROWING and scanned_a_line:
                before = source.path.read_bytes()
                assert _entry_matches(config, source.path), "an appended file is recognised"
                assert source.path.read_bytes() == before
            full = _outcome(config, source.path, False)
            assert _outcome(config, source.path, True) == full, (op, number)


def _session(make_config: ConfigFactory) -> tuple[Config, Path]:
    config = make_config()
    config.state_dir.mkdir(mode=0o700)
    b = _build([("user", "hello"), ("tool", ""), ("say", "hi"), ("user", "again")])
    return config, b.write(config.project_dir / f"{b.session_id}.jsonl")


def _entry(config: Config, path: Path) -> Path:
    cache_dir = scan_cache_dir(config)
    assert cache_dir is not None
    return scan_cache.entry_path(cache_dir, path)


def test_entry_is_private_and_keeps_only_complete_lines(make_config: ConfigFactory) -> None:
    config, path = _session(make_config)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type":"user","message":{"content":"half')
    build_plan(config, path, cached=True)
    entry = _entry(config, path)
    assert entry.stat().st_mode & 0o777 == 0o600
    assert entry.parent.stat().st_mode & 0o777 == 0o700
    header, payload = (entry.read_bytes()[len(scan_cache.FORMAT):-scan_cache.TRAILER_BYTES]
                       .split(b"\n", 1))
    state = pickle.loads(payload)
    assert state.read_to == len(whole) and not state.stats.torn_final_line
    status = path.stat()
    assert header.split() == [str(status.st_dev).encode(), str(status.st_ino).encode(),
                              str(len(whole)).encode(), state.samples.encode()]


@pytest.mark.parametrize("damage", ["garbage", "torn", "foreign", "group_readable", "symlink",
                                    "other_patterns", "other_answer_patterns", "other_engine"])
def test_a_bad_entry_is_ignored_and_replaced(damage: str, make_config: ConfigFactory,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    config, path = _session(make_config)
    full = _outcome(config, path, False)
    build_plan(config, path, cached=True)
    entry = _entry(config, path)
    good = entry.read_bytes()
    witness = tmp_path / "ran"
    if damage == "garbage":
        entry.write_bytes(os.urandom(300))
    elif damage == "torn":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "foreign":  # a well-formed entry that would run code when read
        header = good[len(scan_cache.FORMAT):].split(b"\n", 1)[0] + b"\n"
        payload = header + pickle.dumps(_Runs(str(witness)))
        entry.write_bytes(scan_cache.FORMAT + payload + b"\n"
                          + hashlib.sha256(payload).hexdigest().encode())
    elif damage == "group_readable":
        entry.chmod(0o640)
    elif damage == "symlink":
        elsewhere = tmp_path / "elsewhere.scan"
        elsewhere.write_bytes(good)
        elsewhere.chmod(0o600)
        entry.unlink()
        entry.symlink_to(elsewhere)
    elif damage == "other_patterns":
        config = config.model_copy(update={"speech_tool_pattern": ["mcp__other__*"]})
        full = _outcome(config, path, False)
    elif damage == "other_answer_patterns":
        config = config.model_copy(update={"answer_tool_pattern": ["mcp__other__poll"]})
        full = _outcome(config, path, False)
    elif damage == "other_engine":  # the scan's code changed, its version number did not
        monkeypatch.setattr(scan_cache, "_engine_digest", lambda: "another engine")
    assert not _entry_matches(config, path)
    assert _outcome(config, path, True) == full
    assert not witness.exists()
    assert _entry_matches(config, path)  # the full scan wrote a good entry in its place
    assert entry.stat().st_mode & 0o777 == 0o600 and not entry.is_symlink()


class _Runs:
    def __init__(self, witness: str) -> None:
        self.witness = witness

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.witness}",))


def test_no_state_dir_or_a_read_only_one_means_a_full_scan(make_config: ConfigFactory) -> None:
    config = make_config()
    b = _build([("user", "hello"), ("say", "hi")])
    path = b.write(config.project_dir / f"{b.session_id}.jsonl")
    assert scan_cache_dir(config) is None
    assert _outcome(config, path, True) == _outcome(config, path, False)
    assert not config.state_dir.exists()  # a read-only command never makes the state dir
    config.state_dir.mkdir(mode=0o500)
    try:
        assert _outcome(config, path, True) == _outcome(config, path, False)
    finally:
        config.state_dir.chmod(0o700)
    if os.geteuid() != 0:  # root writes anyway
        assert not config.layout.scan_cache.exists()
    # A cache that cannot be written (here its folder's name is taken by a file, which stops
    # root too): the same plan, no error.
    shutil.rmtree(config.layout.scan_cache, ignore_errors=True)
    config.layout.scan_cache.write_bytes(b"not a folder")
    assert _outcome(config, path, True) == _outcome(config, path, False)
    assert config.layout.scan_cache.read_bytes() == b"not a folder"


def test_entries_are_bounded(make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    config, path = _session(make_config)
    for number in range(scan_cache.MAX_ENTRIES + 3):
        copy = path.with_name(f"copy-{number}.jsonl")
        copy.write_bytes(path.read_bytes())
        build_plan(config, copy, cached=True)
    assert len(list(config.layout.scan_cache.iterdir())) == scan_cache.MAX_ENTRIES
    monkeypatch.setattr(scan_cache, "MAX_ENTRY_BYTES", 100)
    build_plan(config, path, cached=True)
    assert not _entry(config, path).exists()


def _config_file(config: Config, tmp_path: Path) -> Path:
    toml = tmp_path / "config.toml"
    toml.write_text(f'project_dir = "{config.project_dir}"\nstate_dir = "{config.state_dir}"\n'
                    f'tmux_target = "DO-NOT-CREATE-test:0.0"\n')
    return toml


@pytest.mark.usefixtures("single_threaded")
def test_no_early_reader_when_the_cache_takes_the_file_up(make_config: ConfigFactory,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`prestart` forks no reader of the file's later part for a `dirty` or `plan` that the
    cache will take up (it would read half the file for nothing), and still does otherwise."""
    config, path = _session(make_config)
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 1)  # this small file counts as large
    toml = _config_file(config, tmp_path)

    def early_reader(command: str) -> bool:
        started = prestart(["--config", str(toml), "--json", command, "--transcript", str(path)])
        if started is None:
            return False
        started.cancel()
        return True

    assert early_reader("dirty") and early_reader("plan")  # no entry yet
    build_plan(config, path, cached=True)
    extra = _build([("user", "more"), ("say", "done")])
    with path.open("ab") as handle:
        handle.write(extra.write(tmp_path / "extra.jsonl").read_bytes())
    assert _entry_matches(config, path)
    assert not early_reader("dirty") and not early_reader("plan")
    assert early_reader("candidate")  # it never uses the cache
    with path.open("r+b") as handle:  # rewritten in place: the entry no longer fits
        handle.write(b" ")
    assert not _entry_matches(config, path)
    assert early_reader("dirty") and early_reader("plan")


def test_dirty_and_plan_commands_read_only_the_appended_bytes(make_config: ConfigFactory,
                                                              tmp_path: Path) -> None:
    config, path = _session(make_config)
    toml = _config_file(config, tmp_path)

    def cli(command: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "kael_thread_rebuild.interfaces.cli", "--config", str(toml),
             "--json", command, "--transcript", str(path)],
            capture_output=True, text=True, timeout=120, check=True)
        return result.stdout

    cli("dirty")
    assert _entry_matches(config, path)
    extra = _build([("user", "more"), ("tool", ""), ("say", "done")])
    with path.open("ab") as handle:
        handle.write(b"".join(extra.write(tmp_path / "extra.jsonl").read_bytes()
                              .splitlines(keepends=True)))
    assert _entry_matches(config, path)
    plan_cached = cli("plan")
    dirty_cached = cli("dirty")
    scan_cache.entry_path(config.layout.scan_cache, path).unlink()
    assert cli("plan") == plan_cached
    scan_cache.entry_path(config.layout.scan_cache, path).unlink()
    assert cli("dirty") == dirty_cached
