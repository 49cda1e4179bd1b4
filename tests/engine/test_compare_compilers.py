"""The compiler comparison of issue 26 (`benchmarks/compare_compilers.py`) times a kernel that
must measure strings exactly as the engine does: escapes, `\\u` escapes, surrogate pairs, lone
surrogates, non-ASCII; and refuse what the engine refuses inside a string (bad UTF-8, control
characters, unknown escapes). Otherwise its timings would mean nothing."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "compare_compilers.py"

READ = [
    b'{"text":"plain"}',
    orjson.dumps({"t": 'line\none \\ two \\\\n "quoted" é中 \U0001f600 \t end', "n": [1, None]}),
    b'{"a":"caf\\u00e9 \\ud83d\\ude00 \\\\\\" \\/ \\b\\f\\r \\u0041\\u07ff\\u0800\\uffff"}',
    b'{"lone":"cut \\udcff here","high":"\\ud800","swapped":"\\udc00\\ud800"}',
    b'{"raw":"\xf0\x9f\x98\x80 \xe4\xb8\xad \xc3\xa9","\xc3\xa9":true}',
    b'["", "\\"", {"k": ["\\\\"]}]',
]
REFUSED = [
    b'{"bad":"\xff\xfe"}',
    b'{"overlong":"\xc0\xaf"}',
    b'{"surrogate":"\xed\xa0\x80"}',
    b'{"past":"\xf4\x90\x80\x80"}',
    b'{"cut":"\xe4\xb8"}',
    b'{"control":"a\tb"}',
    b'{"escape":"\\x41"}',
    b'{"hex":"\\u00g1"}',
    b'{"open":"never ends}',
]


@pytest.fixture
def compare(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("compare_compilers")


def test_the_interpreted_kernel_measures_as_the_engine_does(compare: ModuleType) -> None:
    kernel = compare.kernel_of(compare._load(compare.SCANNER, "scanner_test"))
    for line in READ:
        assert compare.reference(line) is not None, line
        assert kernel(line) == compare.reference(line), line
    for line in REFUSED:
        assert kernel(line) == -1, line


def test_every_compiled_kernel_measures_as_the_engine_does(tmp_path: Path) -> None:
    transcript = tmp_path / "hard.jsonl"
    transcript.write_bytes(b"\n".join(READ + REFUSED) + b"\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--transcript", str(transcript),
                           "--repeat", "1", "--interpreted-share", "1"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DIFFERS" not in done.stdout
    measured = {line.split()[0]: line for line in done.stdout.splitlines()
                if line.startswith("  ")}
    for kernel in ("interpreted", "scanner_mypyc"):  # mypyc comes with mypy: always built
        assert "same sizes" in measured.get(kernel, ""), done.stdout
    if "scanner_cython_pxd" in measured:  # Cython is a dev dependency; C types change nothing
        assert "same sizes" in measured["scanner_cython_pxd"], done.stdout
        assert "a bound, not checked" in measured["byte_loop_bound"], done.stdout
        assert "same sizes" in measured["scanner_pointers"], done.stdout


def test_a_kernel_that_measures_other_sizes_fails_the_comparison(compare: ModuleType) -> None:
    def by_bytes(line: bytes) -> int:
        return len(line)  # what counting a string's JSON bytes would find

    expected = [compare.reference(line) for line in READ]
    assert compare.disagreements(by_bytes, READ, expected) > 0
