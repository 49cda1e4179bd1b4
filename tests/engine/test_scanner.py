"""The payload scanner (issue 26): it finds a line's long string values and measures them as a
whole parse does (`skeleton._measure`, `text_bytes`, `dumps_line`), refuses what a parse refuses
inside a string, and a plan read through it is the plan read by parsing every line whole; the
module run interpreted and built with mypyc give the same results."""

from __future__ import annotations

import importlib.util
import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.conversation import scan as scan_module
from kael_thread_rebuild.conversation.records import SpeechRules
from kael_thread_rebuild.plan import build_plan
from kael_thread_rebuild.transcript import reader, skeleton
from kael_thread_rebuild.transcript.json_text import dumps_line, loads_line, text_bytes
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, source_path
from tests.engine.test_long_lines import _bad_lines, _rich_transcript

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SOURCE = Path(reader.__file__).with_name("scanner.py")
LEASTS = (1, 7, 64, 300)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def interpreted() -> ModuleType:
    return _load(SOURCE, "scanner_interpreted")


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """scanner.py built by mypyc in a temporary directory (never beside the source, where it
    would be imported in place of the source)."""
    if importlib.util.find_spec("mypyc") is None:
        pytest.skip("mypyc is not installed")
    work = tmp_path_factory.mktemp("mypyc")
    shutil.copyfile(SOURCE, work / "scanner.py")
    subprocess.run([sys.executable, "-m", "mypyc", "scanner.py"], cwd=work, check=True,
                   capture_output=True)
    built = sorted(work.glob("scanner.*.so"))
    assert built, "mypyc built nothing"
    return _load(built[0], "scanner")


@pytest.fixture(params=["interpreted", "compiled"])
def engine(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.getfixturevalue(request.param)
    return module


def test_compiled_says_whether_it_is(interpreted: ModuleType, compiled: ModuleType) -> None:
    assert interpreted.COMPILED is False
    assert compiled.COMPILED is True


def _reference(raw: bytes, least: int) -> list[int]:
    """The long string values of a line the engine reads, found and measured as the long-line
    reader does, each also decoded whole and measured."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(skeleton, "BIG_STRING", least)
        spans = skeleton._big_spans(raw)
    found: list[int] = []
    for start, end in spans:
        utf8, written = skeleton._measure(raw, start, end)
        body = loads_line(b'"' + raw[start:end] + b'"')
        assert (utf8, written) == (len(text_bytes(body)), len(dumps_line(body)))
        found += (start, end, utf8, written)
    return found


def _readable(raw: bytes) -> bool:
    try:
        loads_line(raw)
    except ValueError:
        return False
    return True


LONG = "x" * 300
HAND_WRITTEN = [
    b'{"text":"plain"}',
    orjson.dumps({"t": 'line\none \\ two \\\\n "quoted" \u00e9\u4e2d \U0001f600 \t end',
                  "n": [1, None], "a": [{"b": ["c" * 70, {"d": "e" * 7}]}]}),
    b'{"a":"caf\\u00e9 \\ud83d\\ude00 \\\\\\" \\/ \\b\\f\\r \\u0041\\u07ff\\u0800\\uffff"}',
    b'{"lone":"cut \\udcff here","high":"\\ud800","swapped":"\\udc00\\ud800 and more"}',
    b'{"controls":"\\u0000\\u0001\\u001f\\u0008\\u0009\\u000a\\u000c\\u000d\\u0022\\u005c'
    b'\\u007f\\u002f"}',
    b'{"raw":"\xf0\x9f\x98\x80 \xe4\xb8\xad \xc3\xa9 \xef\xbf\xbf","\xc3\xa9":true}',
    b'["", "\\"", {"k": ["\\\\"]}, "' + LONG.encode() + b'"]',
    b'{"' + LONG.encode() + b'": 1, "' + LONG.encode() + b'"  :  "v", "w" : "'
    + LONG.encode() + b'"}',
    b'{"at":"' + b"y" * 64 + b'","under":"' + b"z" * 63 + b'","just":"' + b"w" * 7 + b'"}',
    b'{"pair_at_the_end":"' + b"a" * 60 + b'\\ud83d\\ude00","high_at_the_end":"\\ud83d"}',
    b'{"nested":[[[{"deep":"' + b"\\u00e9" * 70 + b'"}]]],"after":"' + b"\\n" * 40 + b'"}',
    orjson.dumps({"speech": "\u00e9\u96ea\U0001f600" * 100}) + b"\n",
    b'{"a": "\\t\\"' + b"q" * 300 + b'" }\r\n',
]
REFUSED = [
    b'{"bad":"\xff\xfe' + b"a" * 300 + b'"}',
    b'{"overlong":"\xc0\xaf"}',
    b'{"overlong3":"\xe0\x80\xaf"}',
    b'{"surrogate":"\xed\xa0\x80"}',
    b'{"past":"\xf4\x90\x80\x80"}',
    b'{"cut":"\xe4\xb8"}',
    b'{"cut_at_end":"\xe4',
    b'{"control":"a\tb"}',
    b'{"nul":"a\x00b"}',
    b'{"escape":"\\x41"}',
    b'{"hex":"\\u00g1"}',
    b'{"short_hex":"\\u00"}',
    b'{"open":"never ends}',
    b'{"backslash at the end":"\\',
]


def _fixture_lines() -> Iterator[bytes]:
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        yield from path.read_bytes().splitlines(keepends=True)


def _generated(tmp_path: Path) -> list[Path]:
    spec = importlib.util.spec_from_file_location("gen_transcript",
                                                  ROOT / "benchmarks" / "gen_transcript.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules["gen_transcript"] = gen  # its dataclasses look their module up
    spec.loader.exec_module(gen)
    paths = [tmp_path / "work.jsonl", tmp_path / "chat.jsonl"]
    gen.generate(paths[0], 3 << 20, seed=7)
    gen.generate_shape(paths[1], "chat", 500, seed=7)
    return paths


def _check_lines(scanner: ModuleType, lines: list[bytes]) -> int:
    checked = 0
    for raw in lines:
        if not _readable(raw):
            continue
        for least in LEASTS:
            assert scanner.long_strings(raw, least) == _reference(raw, least), (least, raw)
        checked += 1
    return checked


def test_hand_written_lines_are_measured_as_a_whole_parse_does(engine: ModuleType) -> None:
    assert all(_readable(raw) for raw in HAND_WRITTEN)
    assert _check_lines(engine, HAND_WRITTEN) == len(HAND_WRITTEN)
    raw = HAND_WRITTEN[8]
    spans = engine.long_strings(raw, 64)
    assert len(spans) == 4 and raw[spans[0]:spans[1]] == b"y" * 64  # exactly at the mark


def test_what_a_parse_refuses_inside_a_string_is_refused(engine: ModuleType) -> None:
    for raw in REFUSED:
        assert not _readable(raw), raw
        with pytest.raises(ValueError):
            engine.long_strings(raw, 1)


def test_fixtures_and_generated_transcripts_are_measured_as_a_whole_parse_does(
        engine: ModuleType, tmp_path: Path) -> None:
    lines = list(_fixture_lines())
    for path in _generated(tmp_path):
        lines += path.read_bytes().splitlines(keepends=True)
    assert _check_lines(engine, lines) > 1000


# -- plans: the compiled engine (the scanner) against the interpreted one (whole parses) -----


def _transcripts(config: Config, tmp_path: Path) -> list[Path]:
    rich = _rich_transcript()
    path = rich.write(source_path(config, rich))
    _bad_lines(path)
    fixtures = [p for p in sorted(FIXTURES.rglob("*.jsonl")) if ".subagents" not in str(p)]
    return [path, *fixtures, *_generated(tmp_path)]


def _plan(config: Config, path: Path) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    plan = build_plan(config, path, parallel=False)
    return plan.report.model_dump(), carried(plan)


def _classified(path: Path) -> tuple[Any, ...]:
    with path.open("rb") as handle:
        read, tally, stats = scan_module._classify_range(handle.fileno(), 0, path.stat().st_size,
                                                         SpeechRules())
    return (tally, stats, pickle.dumps(read.table), pickle.dumps(read.speech),
            read.snapshot_texts, read.markers, read.impossible_lines, read.model, read.version,
            read.cwd, read.session_ids,
            read.assumed_answers, read.viewed_original_image)


@pytest.mark.parametrize("least", [7, 300, reader.SKIP_LEAST])
def test_plans_through_the_scanner_equal_whole_parses(
        engine: ModuleType, least: int, make_config: ConfigFactory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = make_config()
    monkeypatch.setattr(reader, "scanner", engine)
    monkeypatch.setattr(reader, "SKIP_LEAST", least)
    monkeypatch.setattr(reader, "SCAN_ABOVE", least + 1)
    for path in _transcripts(config, tmp_path):
        monkeypatch.setenv(reader.ENGINE_VARIABLE, "interpreted")
        whole, classified = _plan(config, path), _classified(path)
        monkeypatch.setenv(reader.ENGINE_VARIABLE, "compiled")
        assert _plan(config, path) == whole, path.name
        assert _classified(path) == classified, path.name


def test_records_through_the_scanner_are_the_lines(
        engine: ModuleType, make_config: ConfigFactory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Line by line: each record read through the scanner, its long strings decoded, is the
    line's whole parse; the lines it cannot read are the same."""
    config = make_config()
    monkeypatch.setattr(reader, "scanner", engine)
    monkeypatch.setattr(reader, "SKIP_LEAST", 7)
    monkeypatch.setattr(reader, "SCAN_ABOVE", 8)
    for path in _transcripts(config, tmp_path):
        lines = path.read_bytes().splitlines(keepends=True)
        for name in ("interpreted", "compiled"):
            monkeypatch.setenv(reader.ENGINE_VARIABLE, name)
            stats = reader.ReadStats()
            skeletal = 0

            def count(_record: dict[str, Any]) -> None:
                nonlocal skeletal
                skeletal += 1

            with path.open("rb") as handle:
                for line, record, size, _ in reader.read_records(
                        handle.fileno(), 0, path.stat().st_size, stats, settle=count):
                    assert size == len(lines[line - 1])
                    assert skeleton.materialize(record) == loads_line(lines[line - 1])
            assert (skeletal > 0) == (name == "compiled"), (name, path.name)
            expected = [n for n, raw in enumerate(lines, 1)
                        if not raw.isspace() and not (_readable(raw)
                                                      and type(loads_line(raw)) is dict)]
            assert stats.unreadable_lines == expected, (name, path.name)


def test_the_engine_is_chosen_by_the_module_and_can_be_forced(
        monkeypatch: pytest.MonkeyPatch, compiled: ModuleType) -> None:
    monkeypatch.delenv(reader.ENGINE_VARIABLE, raising=False)
    monkeypatch.setattr(reader, "SCANNER_BY_DEFAULT", True)
    monkeypatch.setattr(reader, "scanner", _load(SOURCE, "scanner_again"))
    assert reader.engine() == "interpreted"
    monkeypatch.setattr(reader, "scanner", compiled)
    assert reader.engine() == "compiled"
    monkeypatch.setenv(reader.ENGINE_VARIABLE, "interpreted")
    assert reader.engine() == "interpreted"
    monkeypatch.setenv(reader.ENGINE_VARIABLE, "compiled")
    monkeypatch.setattr(reader, "scanner", _load(SOURCE, "scanner_again"))
    assert reader.engine() == "compiled"
    monkeypatch.delenv(reader.ENGINE_VARIABLE)
    monkeypatch.setattr(reader, "SCANNER_BY_DEFAULT", False)
    monkeypatch.setattr(reader, "scanner", compiled)
    assert reader.engine() == "interpreted"


@pytest.mark.parametrize("value", ["fast", "Compiled", " compiled"])
def test_doctor_warns_of_an_engine_choice_that_is_ignored(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A mistyped KAEL_SCANNER reads like a choice but leaves the default engine running."""
    from kael_thread_rebuild.doctor.engine import check_engine

    monkeypatch.setenv(reader.ENGINE_VARIABLE, value)
    check = check_engine(None)  # the check reads no facts
    assert check.warning, check
    assert repr(value) in check.detail and "compiled, interpreted" in check.detail, check
    assert reader.engine() in check.detail, check
    for chosen in reader.ENGINES:
        monkeypatch.setenv(reader.ENGINE_VARIABLE, chosen)
        assert not check_engine(None).warning
