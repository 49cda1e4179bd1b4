"""Bad input through the real command line: one clear line, the right exit code, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builder import TranscriptBuilder


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kael_thread_rebuild.interfaces.cli", *args],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "{project}"\n')
    return project, out, config


def _one_line_error(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert words in lines[0], lines[0]


def _candidate(config: Path, out: Path, transcript: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("--config", str(config), "candidate", "--transcript", str(transcript),
                   "--output-dir", str(out))


CASES = {
    "missing": (2, "does not exist"),
    "directory": (2, "is a directory"),
    "empty": (1, "is empty"),
    "garbage": (1, "not a Claude Code transcript"),
    "invalid_utf8": (1, "not a Claude Code transcript"),
    "outside": (1, "outside project_dir"),
    "symlink": (1, "symlink that leads outside"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_transcripts_fail_cleanly_and_write_nothing(
        case: str, setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    project, out, config = setup
    target = project / f"{case}.jsonl"
    if case == "directory":
        target.mkdir()
    elif case == "empty":
        target.write_bytes(b"")
    elif case == "garbage":
        target.write_bytes(os.urandom(4096).replace(b"\n", b"\x00") + b"\n" + b"\x01\x02\n")
    elif case == "invalid_utf8":
        target.write_bytes(b'{"type": "user", "text": "\xff\xfe"}\n')
    elif case == "outside":
        target = tmp_path / "elsewhere.jsonl"
        TranscriptBuilder().write(target)
    elif case == "symlink":
        real = tmp_path / "secret.jsonl"
        TranscriptBuilder().write(real)
        target.symlink_to(real)
    code, words = CASES[case]
    for command in (["plan"], ["dirty"]):
        result = run_cli("--config", str(config), *command, "--transcript", str(target))
        _one_line_error(result, code, words)
    _one_line_error(_candidate(config, out, target), code, words)
    assert list(out.iterdir()) == []


def test_malformed_line_in_the_middle_blocks_the_plan(setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    b = TranscriptBuilder()
    b.user("one")
    b.say("two")
    path = b.write(project / "t.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(3, b'{"type": "user", "message": {"content": "half a line\n')
    path.write_bytes(b"".join(lines))
    before = path.read_bytes()
    plan = run_cli("--config", str(config), "--json", "plan", "--transcript", str(path))
    assert plan.returncode == 0
    report = json.loads(plan.stdout)
    assert report["unreadable_lines"] == [4]
    assert report["blocked_reason"].startswith("1 unreadable line")
    result = _candidate(config, out, path)
    _one_line_error(result, 1, "plan blocked: 1 unreadable line")
    assert list(out.iterdir()) == []
    assert path.read_bytes() == before


def test_torn_final_line_is_ignored_and_reported(setup: tuple[Path, Path, Path]) -> None:
    project, _, config = setup
    b = TranscriptBuilder()
    b.user("one")
    b.say("two")
    path = b.write(project / "t.jsonl")
    with path.open("ab") as handle:
        handle.write(b'{"type":"user","message":{"content":"being writ')
    result = run_cli("--config", str(config), "--json", "plan", "--transcript", str(path))
    report = json.loads(result.stdout)
    assert report["torn_final_line"] and report["blocked_reason"] == ""
    assert report["source_turns"] == 1


def test_a_50_mb_line_is_read_without_trouble(setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    b = TranscriptBuilder()
    b.user("dump the database")
    b.tool_call("Bash", "r" * (50 * 1024 * 1024))
    b.say("Dumped.")
    path = b.write(project / "big.jsonl")
    result = _candidate(config, out, path)
    assert result.returncode == 0, result.stderr
    assert "Dumped." in next(out.glob("*.jsonl")).read_text()
    assert next(out.glob("*.jsonl")).stat().st_size < 10_000


def test_a_50_mb_line_of_garbage_blocks(setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    b = TranscriptBuilder()
    b.user("one")
    b.say("two")
    path = b.write(project / "t.jsonl")
    with path.open("ab") as handle:
        handle.write(b"{" + b"g" * (50 * 1024 * 1024) + b"\n")
    _one_line_error(_candidate(config, out, path), 1, "plan blocked: 1 unreadable line")


def test_config_errors_name_each_key_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('project_dir = "relative"\ncarry_overflow = "sometimes"\ntypo = 1\n')
    result = run_cli("--config", str(config), "plan")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and "Traceback" not in result.stderr
    assert any("project_dir" in line for line in lines)
    assert any("carry_overflow" in line for line in lines)
    assert any("typo: unknown key" in line for line in lines)
    for bad in ("not toml = = 1", ""):
        config.write_text(bad)
        result = run_cli("--config", str(config), "plan")
        assert result.returncode == 2 and "Traceback" not in result.stderr
    missing = run_cli("--config", str(tmp_path / "nope.toml"), "plan")
    assert missing.returncode == 2 and "file not found" in missing.stderr
    no_config = run_cli("plan", env={"KAEL_REBUILD_CONFIG": ""})
    assert no_config.returncode == 2 and "KAEL_REBUILD_CONFIG" in no_config.stderr


def test_config_from_the_environment_and_newest_transcript(
        setup: tuple[Path, Path, Path]) -> None:
    project, _out, config = setup
    TranscriptBuilder(session_id="11111111-1111-4111-8111-111111111111").write(
        project / "11111111-1111-4111-8111-111111111111.jsonl")
    newest = TranscriptBuilder(session_id="22222222-2222-4222-8222-222222222222")
    newest.user("latest words")
    newest.say("ok")
    newest.write(project / "22222222-2222-4222-8222-222222222222.jsonl")
    result = run_cli("--json", "plan", env={"KAEL_REBUILD_CONFIG": str(config)})
    assert json.loads(result.stdout)["source_session_id"].startswith("2222")
    made = run_cli("--json", "candidate", "--output-dir", str(project),
                   env={"KAEL_REBUILD_CONFIG": str(config)})
    assert made.returncode == 0, made.stderr
    # A candidate beside its manifest is never taken for the newest transcript.
    again = run_cli("--json", "plan", env={"KAEL_REBUILD_CONFIG": str(config)})
    assert json.loads(again.stdout)["source_session_id"].startswith("2222")


def test_help_explains_every_command() -> None:
    for command in ("plan", "dirty", "candidate"):
        result = run_cli(command, "--help")
        assert result.returncode == 0 and "--transcript" in result.stdout
    assert "exit codes" in run_cli("--help").stdout


def test_default_state_dir_is_expanded_not_relative(tmp_path: Path) -> None:
    from kael_thread_rebuild.config import parse_config

    config = parse_config({"project_dir": str(tmp_path)})
    assert config.state_dir.is_absolute() and "~" not in str(config.state_dir)
