"""The reader comparison of issue 11 (`benchmarks/compare_parsers.py`) compares like with like:
on lines full of what makes sizes hard (escapes, `\\u` escapes, surrogate pairs, non-ASCII,
structured tool results, bad UTF-8, lines that are not objects), msgspec and pysimdjson must
find exactly the facts orjson finds, or their timings would mean nothing."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_parsers.py"


def _record(kind: str, content: object, **extra: object) -> bytes:
    message = {"role": kind, "content": content, **extra}
    return orjson.dumps({"type": kind, "uuid": f"u-{kind}-{len(str(content))}",
                         "parentUuid": None, "timestamp": "2026-11-01T08:00:00.000Z",
                         "isSidechain": False, "sessionId": "s", "message": message})


def _hard_lines() -> list[bytes]:
    tricky = 'line\none \\ two \\\\n "quoted" é中 \U0001f600 \t end'
    return [
        _record("user", "plain words, é"),
        _record("user", [{"type": "tool_result", "tool_use_id": "t", "content": tricky}]),
        _record("user", [{"type": "tool_result", "content": [
            {"type": "text", "text": tricky}, {"type": "image", "source": {"data": "QUJD"}}]}]),
        _record("assistant", [
            {"type": "thinking", "thinking": tricky, "signature": "c2ln"},
            {"type": "text", "text": tricky},
            {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": tricky}},
        ], id="msg_1", model="claude"),
        # escapes written by hand: \u escapes and a surrogate pair, as another writer may
        b'{"type":"user","uuid":"u-esc","message":{"role":"user","content":[{"type":'
        b'"tool_result","content":"caf\\u00e9 \\ud83d\\ude00 \\\\\\" \\/ \\b\\f\\r"}]}}',
        b'{"type":"user","uuid":"u-bad","message":{"content":"\xff\xfe"}}',
        b"[1, 2, 3]",
        b'{"type":"user","message":"not an object"}',
        b"not json",
    ]


def test_every_reader_finds_what_orjson_finds(tmp_path: Path) -> None:
    transcript = tmp_path / "hard.jsonl"
    transcript.write_bytes(b"\n".join(_hard_lines()) + b"\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--transcript", str(transcript),
                           "--repeat", "1"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    for contender in ("orjson", "msgspec", "pysimdjson"):
        assert f"  {contender} " in done.stdout, done.stdout
    assert "DIFFERS" not in done.stdout


def test_a_reader_that_finds_other_facts_fails_the_comparison(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    compare_parsers = importlib.import_module("compare_parsers")

    def escapes_ignored() -> Callable[[bytes], object]:
        # what measuring a payload by its JSON bytes alone would find
        return lambda line: compare_parsers.orjson_facts(line.replace(b"\\n", b"n"))

    monkeypatch.setitem(compare_parsers.CONTENDERS, "by-bytes", escapes_ignored)
    assert compare_parsers.compare(_hard_lines(), 1) == 1
    assert "by-bytes" in (out := capsys.readouterr().out)
    assert "DIFFERS from orjson at line 2" in out
