"""`plan` and `dirty` from a config validated before (`checked_config`), through the real console
script: the second call runs without pydantic and prints what the first printed; a config edited
since, another $HOME, or a record that is not the user's private, whole file sends the call
through the validator again, which refuses a mistake as it always did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kael_thread_rebuild.checked_config import RECORD
from kael_thread_rebuild.config import load_config, parse_config
from kael_thread_rebuild.plan import build_plan
from kael_thread_rebuild.reading_settings import ReadingSettings
from kael_thread_rebuild.state_layout import CONFIG_ENV, SCAN_CACHE
from tests.builder import TranscriptBuilder

CLI = Path(sys.executable).with_name("kael-thread-rebuild")


def _transcript(project: Path, result_bytes: int) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    builder = TranscriptBuilder()
    builder.first_turn_attachments()
    builder.user("hello")
    builder.tool_call("Read", "x" * result_bytes, text="reading")
    builder.say("done")
    return builder.write(project / "one-turn.jsonl")


@pytest.fixture
def household(tmp_path: Path) -> tuple[Path, Path]:
    """A config whose state dir exists (the engine made it, 0700) and a one-turn transcript."""
    transcript = _transcript(tmp_path / "project", 4096)
    (tmp_path / "state").mkdir(mode=0o700)
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "{tmp_path / "project"}"\n'
                      f'state_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
    return config, transcript


def _run(config: Path, *words: str, home: Path | None = None) -> tuple[str, list[str]]:
    """stdout of the console script, and the modules it imported; the call must succeed."""
    done = _call(config, *words, home=home)
    assert done.returncode == 0, done.stderr
    return done.stdout, _imported(done.stderr)


def _call(config: Path, *words: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop(CONFIG_ENV, None)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run([str(CLI), "--config", str(config), *words], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def _imported(importtime: str) -> list[str]:
    return [line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and line.count("|") == 2]


def _validated(imported: list[str]) -> bool:
    assert "kael_thread_rebuild.plan" in imported, "no import was profiled"
    return "pydantic" in imported


@pytest.mark.parametrize("words", [("dirty",), ("dirty", "--json"), ("plan",),
                                   ("plan", "--json")])
def test_the_second_call_prints_the_same_without_the_validator(
        household: tuple[Path, Path], words: tuple[str, ...]) -> None:
    config, transcript = household
    first, imported = _run(config, *words, "--transcript", str(transcript))
    assert _validated(imported)
    record = transcript.parent.parent / "state" / SCAN_CACHE / RECORD
    assert record.stat().st_mode & 0o777 == 0o600
    second, imported = _run(config, *words, "--transcript", str(transcript))
    assert not _validated(imported)
    assert second == first
    if "--json" in words:
        report = build_plan(load_config(config), transcript).report
        expected = report if words[0] == "plan" else report.dirty
        assert json.loads(second) == expected.model_dump(mode="json")


def test_an_edited_config_is_validated_again(household: tuple[Path, Path]) -> None:
    config, transcript = household
    _run(config, "dirty", "--transcript", str(transcript))
    with config.open("a", encoding="utf-8") as file:
        file.write("dirty_budget_bytes = 1\n")
    out, imported = _run(config, "dirty", "--json", "--transcript", str(transcript))
    assert _validated(imported)
    shown = json.loads(out)
    assert shown["dirty_budget_bytes"] == 1 and shown["should_rebuild"]
    again, imported = _run(config, "dirty", "--json", "--transcript", str(transcript))
    assert not _validated(imported) and again == out


@pytest.mark.parametrize(("line", "problem"), [
    ("dirty_budget_byte = 1", "dirty_budget_byte: unknown key"),
    ("dirty_budget_bytes = \"1\"", "dirty_budget_bytes: Input should be a valid integer"),
    ("poison_pattern = \"(?=x)\"", "poison_pattern: is not a regular expression RE2 accepts"),
])
def test_a_mistake_made_since_is_refused(household: tuple[Path, Path], line: str,
                                         problem: str) -> None:
    config, transcript = household
    _run(config, "dirty", "--transcript", str(transcript))
    with config.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
    done = _call(config, "dirty", "--transcript", str(transcript))
    assert done.returncode == 2
    assert problem in done.stderr


def test_another_home_is_another_config(tmp_path: Path) -> None:
    """`~` in project_dir means the project of the $HOME the command runs with."""
    (tmp_path / "state").mkdir(mode=0o700)
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "~/project"\nstate_dir = "{tmp_path / "state"}"\n',
                      encoding="utf-8")
    shown = {}
    for home, size in (("a", 1000), ("b", 5000), ("a", 1000)):
        _transcript(tmp_path / home / "project", size)
        out, _ = _run(config, "dirty", "--json", home=tmp_path / home)
        shown[home] = json.loads(out)
    settings = parse_config({"project_dir": str(tmp_path / "b" / "project"),
                             "state_dir": str(tmp_path / "state")})
    expected = build_plan(settings, tmp_path / "b" / "project" / "one-turn.jsonl").report
    assert shown["b"] == expected.dirty.model_dump(mode="json")
    assert shown["a"]["categories"]["tool_result"] < shown["b"]["categories"]["tool_result"]


@pytest.mark.parametrize("spoil", ["open to others", "torn", "not json"])
def test_a_record_that_is_not_private_and_whole_is_no_record(household: tuple[Path, Path],
                                                             spoil: str) -> None:
    config, transcript = household
    first, _ = _run(config, "dirty", "--transcript", str(transcript))
    record = transcript.parent.parent / "state" / SCAN_CACHE / RECORD
    if spoil == "open to others":
        record.chmod(0o644)
    elif spoil == "torn":
        record.write_bytes(record.read_bytes()[:40])
    else:
        record.write_bytes(b"\x00" * 10)
    out, imported = _run(config, "dirty", "--transcript", str(transcript))
    assert _validated(imported) and out == first
    assert record.stat().st_mode & 0o777 == 0o600  # renewed, private again
    out, imported = _run(config, "dirty", "--transcript", str(transcript))
    assert not _validated(imported) and out == first


def test_no_state_dir_no_record(tmp_path: Path) -> None:
    """A read-only command never makes the state dir: each call validates."""
    transcript = _transcript(tmp_path / "project", 100)
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "{tmp_path / "project"}"\n'
                      f'state_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
    for _ in range(2):
        _, imported = _run(config, "dirty", "--transcript", str(transcript))
        assert _validated(imported)
    assert not (tmp_path / "state").exists()


def test_an_error_reads_the_same_from_the_record(household: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    config, transcript = household
    outside = _transcript(tmp_path / "elsewhere", 10)
    answers = [_call(config, "dirty", "--transcript", str(path))
               for path in (outside, outside, transcript, outside)]
    assert [done.returncode for done in answers] == [1, 1, 0, 1]
    assert "is outside project_dir" in answers[0].stderr
    assert answers[0].stderr.splitlines()[-1] == answers[3].stderr.splitlines()[-1]
    assert not _validated(_imported(answers[3].stderr))


def test_the_settings_are_the_config_values(tmp_path: Path) -> None:
    config = parse_config({
        "project_dir": str(tmp_path), "state_dir": "~/elsewhere", "carry_max_tokens": 9000,
        "carry_overflow": "block", "token_divisor": 2.5, "speech_tool_pattern": ["a*", "b"],
        "answer_tool_pattern": [], "poison_pattern": "x+", "include_open_tail": False})
    settings = config.reading
    assert ReadingSettings.of(settings.as_values()) == settings
    for name in ReadingSettings.names():
        value = getattr(settings, name)
        assert (list(value) if isinstance(value, tuple) else value) == getattr(config, name)


def test_the_early_reader_takes_less_when_the_config_is_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process starts reading sooner when it does not validate the config, so the child
    reading the file's later part (`interfaces.prestart`) is given less of a head start."""
    from kael_thread_rebuild.conversation import scan as scan_module
    from kael_thread_rebuild.interfaces import prestart as prestart_module

    project = tmp_path / "project"
    project.mkdir()
    builder = TranscriptBuilder()
    for turn in range(60):
        builder.user(f"question {turn}")
        builder.say(f"answer {turn} " + "y" * 200)
    transcript = builder.write(project / "turns.jsonl")
    (tmp_path / "state").mkdir(mode=0o700)
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "{project}"\nstate_dir = "{tmp_path / "state"}"\n',
                      encoding="utf-8")
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_BYTES", 0)
    # scaled to the small file: the child's share starts at 30% unchecked, 50% checked
    monkeypatch.setattr(prestart_module, "PARENT_SHARE", 0.5)
    monkeypatch.setattr(prestart_module, "HEAD_START_BYTES", transcript.stat().st_size)
    monkeypatch.setattr(prestart_module, "CHECKED_HEAD_START_BYTES", 0)
    words = ["--config", str(config), "dirty", "--transcript", str(transcript)]
    starts = []
    for _ in range(2):
        started = prestart_module.prestart(words)
        assert started is not None
        starts.append(started.start / started.size)
        started.cancel()
        _run(config, "dirty", "--transcript", str(transcript))
        for entry in (tmp_path / "state" / SCAN_CACHE).glob("*.scan"):  # else no child starts
            entry.unlink()
    assert starts[0] < 0.4 < 0.45 < starts[1] < 0.55


def test_a_config_named_by_the_environment_is_checked_too(household: tuple[Path, Path]) -> None:
    config, transcript = household
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", CONFIG_ENV: str(config)}
    runs = [subprocess.run([str(CLI), "dirty", "--transcript", str(transcript)],
                           capture_output=True, text=True, env=env, timeout=120, check=True)
            for _ in range(2)]
    assert [_validated(_imported(run.stderr)) for run in runs] == [True, False]
    assert runs[0].stdout == runs[1].stdout
