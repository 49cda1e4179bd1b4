"""Config strictness, over-long arguments, the `reason` cap and the Stop hook's stdin, through
the real command line and the real MCP server over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service
from tests.builder import SESSION, TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.test_cli_bad_input import run_cli
from tests.test_mcp_server import (
    call,
    config,
    config_path,
    text_of,
    with_session,
    write_config,
)

__all__ = ["config", "config_path"]  # the fixtures, shared with the MCP server tests

LONG_PATH = "/tmp/" + "p" * 5000  # over PATH_MAX, and its name over NAME_MAX


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()


def _one_line(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    lines = _lines(result)
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and words in lines[0], result.stderr


# -- config ------------------------------------------------------------------------------------

BAD_KEYS = {
    "stamp_turns": '"yes"',
    "include_open_tail": "1",
    "freeze_startup_snapshot": '"true"',
    "dirty_budget_bytes": '"1"',
    "poison_threshold": "true",
    "max_event_chars": "1.5",
    "token_divisor": "1e-320",
    "poll_interval_seconds": "1e300",
    "stability_interval_seconds": "1e-300",
    "health_timeout_seconds": "inf",
    "stability_samples": "1000000000",
    "claude_workdir": '"~nosuchuser-kael/work"',
    "claude_config_dir": '"/tmp/a\\u0000b"',
    "resume_pointer_path": '"/"',
}


def test_bad_values_one_line_per_key_exit_2(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    body = "".join(f"{key} = {value}\n" for key, value in BAD_KEYS.items())
    file.write_text(f'project_dir = "{tmp_path}"\nstate_dir = "{tmp_path / "state"}"\n{body}')
    result = run_cli("--config", str(file), "plan")
    lines = _lines(result)
    assert result.returncode == 2
    named = [line.split(": ")[2] for line in lines]
    assert sorted(named) == sorted(BAD_KEYS), lines
    assert not (tmp_path / "state").exists()


def test_bounds_leave_room_for_real_settings(tmp_path: Path) -> None:
    """A long --append-system-prompt fits a resume_command word; ints pass for seconds."""
    file = tmp_path / "c.toml"
    prompt = "Be kind. " * 10_000
    file.write_text(f'project_dir = "{tmp_path}"\nstate_dir = "{tmp_path / "state"}"\n'
                    f'resume_command = ["claude", "--append-system-prompt", "{prompt}", '
                    '"--resume", "{session_id}"]\nhealth_timeout_seconds = 30\n')
    result = run_cli("--config", str(file), "status")
    assert result.returncode == 0 and result.stdout == "no operation yet\n", result.stderr


@pytest.mark.parametrize(("setting", "words"), [
    ('project_dir = "~nosuchuser-kael/project"', "project_dir: '~nosuchuser-kael/project': the "
                                                 "home directory it names is unknown"),
    ('state_dir = "/"', "state_dir: must not be the root directory"),
    ('state_dir = "{file}"', "state_dir: {file} is a file, not a directory"),
    ('project_dir = "{file}"', "project_dir: {file} is a file, not a directory"),
    ('state_dir = "/tmp/a\\u0000b"', "state_dir: /tmp/a\\x00b contains a NUL character"),
    (f'state_dir = "{LONG_PATH}"', "state_dir: /tmp/pppp"),
    ('resume_command = ["claude", "--resume", "{{session_id}}", "a\\u0000"]',
     "resume_command: contains a NUL character"),
])
def test_each_bad_setting_is_one_line(tmp_path: Path, setting: str, words: str) -> None:
    file = tmp_path / "c.toml"
    plain = tmp_path / "a-file"
    plain.write_text("x")
    project = tmp_path / "project"
    project.mkdir()
    body = setting.format(file=plain)
    key = body.split(" = ")[0]
    lines = [f'project_dir = "{project}"', f'state_dir = "{tmp_path / "state"}"']
    lines = [line for line in lines if not line.startswith(key + " ")]
    file.write_text("\n".join([*lines, body]) + "\n")
    for command in ("plan", "status"):
        _one_line(run_cli("--config", str(file), command), 2, words.format(file=plain))


def test_read_only_commands_create_nothing(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config(state_dir=str(tmp_path / "fresh" / "state"))
    path = write_config(config, tmp_path / "c.toml")
    b = TranscriptBuilder()
    b.user("hello")
    b.say("hi")
    b.write(config.project_dir / f"{SESSION}.jsonl")
    for command in (["status"], ["history"], ["wait", "--timeout", "1"], ["plan"], ["dirty"],
                    ["status", "--operation", "20261201T000000Z-00000000"]):
        result = run_cli("--config", str(path), *command)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode in (0, 2), (command, result.stderr)
        assert not (tmp_path / "fresh").exists(), command
    doctor = run_cli("--config", str(path), "doctor")
    assert "Traceback" not in doctor.stderr
    assert not (tmp_path / "fresh").exists()


# -- over-long arguments, the reason cap ------------------------------------------------------


def test_over_long_paths_and_arguments_are_one_line(make_config: ConfigFactory,
                                                    tmp_path: Path) -> None:
    config = make_config()
    path = str(write_config(config, tmp_path / "c.toml"))
    for command in ("plan", "dirty"):
        _one_line(run_cli("--config", path, command, "--transcript", LONG_PATH), 2,
                  "is 5005 bytes long; a path has at most 4095")
    _one_line(run_cli("--config", path, "candidate", "--transcript", LONG_PATH,
                      "--output-dir", str(tmp_path)), 2, "a path has at most 4095")
    _one_line(run_cli("--config", path, "candidate", "--output-dir", LONG_PATH), 2,
              "--output-dir /tmp/pppp")
    _one_line(run_cli("--config", LONG_PATH, "plan"), 2, "a path has at most 4095")
    _one_line(run_cli("--config", path, "status", "--operation", "x" * 5000), 2,
              "not an operation id")
    _one_line(run_cli("--config", path, "request", "--reason", "r" * 100_000,
                      "--confirm", "REBUILD"), 2, "the reason has 100000 characters; at most 2000")
    _one_line(run_cli("--config", path, "wait", "--timeout", "nan"), 2, "--timeout")
    assert service.history(config) == []


def test_mcp_tools_say_why(config: Config, config_path: Path) -> None:
    async def body(session: ClientSession) -> dict[str, CallToolResult]:
        return {
            "plan": await call(session, "thread_rebuild_plan", transcript=LONG_PATH),
            "dirty": await call(session, "thread_rebuild_dirty", transcript="/tmp/a\0b"),
            "request": await call(session, "thread_rebuild_request",
                                  reason="r" * (10 << 20), confirmation="REBUILD"),
            "status": await call(session, "thread_rebuild_status", operation_id="x" * 5000),
        }

    out = with_session(config_path, body)
    assert "a path has at most 4095" in text_of(out["plan"])
    assert "contains a NUL character" in text_of(out["dirty"])
    assert "the reason has 10485760 characters; at most 2000" in text_of(out["request"])
    assert "not an operation id" in text_of(out["status"])
    for result in out.values():
        assert result.is_error and len(text_of(result).splitlines()) == 1
        assert len(text_of(result)) < 400
    assert service.history(config) == []


# -- the Stop hook's stdin ---------------------------------------------------------------------


def _hook_with_open_stdin(config_path: Path, written: bytes) -> tuple[int, float]:
    """Run hook-stop with a stdin pipe that stays open after WRITTEN; (exit code, seconds)."""
    started = time.monotonic()
    hook = subprocess.Popen(
        [sys.executable, "-m", "kael_thread_rebuild.interfaces.cli", "--config",
         str(config_path), "hook-stop"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    assert hook.stdin is not None
    try:
        hook.stdin.write(written)
        hook.stdin.flush()
        code = hook.wait(timeout=30)  # the pipe is still open here
    finally:
        hook.kill()
        hook.stdin.close()
        hook.wait()
    return code, time.monotonic() - started


def test_hook_stop_never_waits_on_an_open_stdin(config: Config, config_path: Path) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.say("hi")
    transcript = b.write(config.project_dir / f"{SESSION}.jsonl")
    stop = json.dumps({"session_id": SESSION, "transcript_path": str(transcript),
                       "cwd": str(config.project_dir), "hook_event_name": "Stop",
                       "last_assistant_message": "hi"}).encode()

    code, seconds = _hook_with_open_stdin(config_path, b"")  # nothing pending: not even read
    assert code == 0 and seconds < 3
    assert not config.state_dir.exists()

    op = service.request(config, "tidy up", "REBUILD")
    code, seconds = _hook_with_open_stdin(config_path, stop)  # a whole object: read no more
    assert code == 0 and seconds < 3
    assert service.status(config, op.operation_id).status.value == "scheduled"  # type: ignore[union-attr]

    service.cancel(config, op.operation_id, "CANCEL")
    second = service.request(config, "again", "REBUILD")
    code, seconds = _hook_with_open_stdin(config_path, stop[:20])  # a stdin that stalls
    assert code == 0 and seconds < 15
    failed = service.status(config, second.operation_id)
    assert failed is not None and failed.status.value == "failed"
    assert failed.error == "the Stop hook input is not JSON"

