"""Hostile input through the real entry points: lines nested tens of thousands of levels deep, a
config that is not a regular file or is huge, line breaks in paths, a poison pattern that would
backtrack without end. Each gives one line (or a reported unreadable line) and never a traceback,
a hang or an unbounded read."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.state_layout import CONFIG_ENV
from tests.builder import SESSION, TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.test_mcp_server import MCP_BIN, config, config_path, write_config

__all__ = ["config", "config_path"]  # fixtures

CLI = Path(sys.executable).with_name("kael-thread-rebuild")
DEPTH = 50_000
# Nested DEPTH levels, with a lone surrogate escape: orjson refuses the depth (its limit is 1024),
# and the escape sends the line on to the standard library's parser. (A bare `[` * DEPTH line
# was already an unreadable line: orjson refuses it and nothing else reads it.)
DEEP_LINES = {
    "brackets with a surrogate": b"[" * DEPTH + b'"\\udcff"' + b"]" * DEPTH,
    "objects with a surrogate": b'{"a":' * DEPTH + b'"\\udcff"' + b"}" * DEPTH,
    "a long line with a surrogate": b'{"a":' * DEPTH + b'"\\udcff","b":"' + b"x" * (9 << 20)
                                    + b'"' + b"}" * DEPTH,
}
MEMORY_CAP = 1 << 31  # address space of a child that must not read a device without end


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(argv: Sequence[str], stdin: bytes = b"", env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A real entry point, its memory capped; a run that outlasts TIMEOUT fails the test."""
    try:
        done = subprocess.run([str(arg) for arg in argv], input=stdin, capture_output=True,
                              timeout=timeout, env={**os.environ, **(env or {})},
                              preexec_fn=_capped, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv[0]} {' '.join(map(str, argv[1:]))[:200]} ran over {timeout} s")
    return subprocess.CompletedProcess(done.args, done.returncode,
                                       done.stdout.decode(errors="replace"),
                                       done.stderr.decode(errors="replace"))


def _one_line(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr[-3000:]
    assert len(lines) == 1 and words in lines[0], result.stderr[-3000:]


# -- F3: deep nesting --------------------------------------------------------------------------


@pytest.mark.parametrize("deep", list(DEEP_LINES))
def test_a_deeply_nested_transcript_line_is_an_unreadable_line(
        deep: str, config: Config, config_path: Path, tmp_path: Path) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.say("hi")
    b.user("and then?")
    b.say("then this")
    path = b.write(config.project_dir / f"{SESSION}.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], DEEP_LINES[deep] + b"\n", *lines[3:]]))

    plan = run([CLI, "--config", config_path, "--json", "plan"])
    assert plan.returncode == 0 and "Traceback" not in plan.stderr, plan.stderr[-3000:]
    report = json.loads(plan.stdout)
    assert report["unreadable_lines"] == [4]
    assert "1 unreadable line (first at line 4)" in report["blocked_reason"]
    dirty = run([CLI, "--config", config_path, "dirty"])
    assert dirty.returncode == 0 and "Traceback" not in dirty.stderr, dirty.stderr[-3000:]
    out = tmp_path / "out"
    out.mkdir()
    _one_line(run([CLI, "--config", config_path, "candidate", "--output-dir", out]), 1,
              "unreadable line")
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("deep", ["objects", "brackets then a brace"])
def test_hook_stop_fails_the_operation_on_a_deeply_nested_input(
        deep: str, config: Config, config_path: Path) -> None:
    stdin = (b'{"a":' * DEPTH + b"1" + b"}" * DEPTH if deep == "objects"
             else b"[" * DEPTH + b"{}")
    op = service.request(config, "tidy up", "REBUILD")
    result = run([CLI, "--config", config_path, "hook-stop"], stdin=stdin)
    assert result.returncode == 0 and result.stdout == "", result.stderr[-3000:]
    assert result.stderr == ""
    failed = service.status(config, op.operation_id)
    assert failed is not None and failed.status.value == "failed"
    assert failed.error == "the Stop hook input is not JSON"
    log = config.layout.hook_log.read_text().splitlines()
    assert len(log) == 1 and log[0].endswith(f"operation {op.operation_id} -> failed: "
                                             "the Stop hook input is not JSON")


# -- F6: a config that is not a regular file, or too large ---------------------------------------


def _not_regular(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A config path of KIND, and the words its one line says."""
    if kind == "/dev/zero":
        return "/dev/zero", "/dev/zero: is a character device, not a regular file"
    if kind == "a FIFO":
        fifo = tmp_path / "config.fifo"
        os.mkfifo(fifo)
        return str(fifo), f"{fifo}: is a FIFO, not a regular file"
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * (2 << 20) + b'\nproject_dir = "/tmp"\n')
    return str(huge), f"{huge}: is over 1 MiB; a config file is at most that"


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO", "a 2 MiB file"])
@pytest.mark.parametrize("given", ["--config", CONFIG_ENV])
def test_a_config_that_is_not_a_small_regular_file_is_one_line(
        kind: str, given: str, tmp_path: Path) -> None:
    path, words = _not_regular(kind, tmp_path)
    named = ["--config", path] if given == "--config" else []
    env = {CONFIG_ENV: path} if given == CONFIG_ENV else {}
    for command in (["plan"], ["dirty"], ["status"], ["doctor"]):
        _one_line(run([CLI, *named, *command], env=env, timeout=30), 2, words)
    hook = run([CLI, *named, "hook-stop"], stdin=b"{}", env=env, timeout=30)
    _one_line(hook, 0, words)
    mcp = run([MCP_BIN, *named], env=env, timeout=30)
    _one_line(mcp, 2, words)


# -- F7: line breaks in paths; a poison pattern that would run away ----------------------------


def _toml(**keys: object) -> str:
    """Keys as TOML: a JSON string is a TOML basic string (`\\n` for a line break)."""
    return "".join(f"{key} = {json.dumps(str(value))}\n" for key, value in keys.items())


def test_a_line_break_in_a_path_is_shown_escaped_on_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    state = tmp_path / "state"
    config.write_text(_toml(project_dir="/x/pr\noj", state_dir=state))
    for command in ("plan", "dirty"):
        _one_line(run([CLI, "--config", config, command]), 2,
                  "project_dir /x/pr\\noj does not exist or is not a directory")
    _one_line(run([CLI, "--config", "a\nb", "plan"]), 2,
              "kael-thread-rebuild: a\\nb: file not found")
    _one_line(run([CLI, "--config", "a\nb", "hook-stop"], stdin=b"{}"), 0,
              "kael-thread-rebuild hook-stop: a\\nb: file not found")
    _one_line(run([MCP_BIN, "--config", "a\nb"]), 2,
              "kael-thread-rebuild-mcp: a\\nb: file not found")

    odd = tmp_path / "pr\noj"
    odd.write_text("a file where a directory belongs")
    config.write_text(_toml(project_dir=tmp_path, state_dir=odd))
    _one_line(run([CLI, "--config", config, "status"]), 2,
              f"state_dir: {tmp_path}/pr\\noj is a file, not a directory")

    project = tmp_path / "pro\nject"
    project.mkdir()
    config.write_text(_toml(project_dir=project, state_dir=state))
    _one_line(run([CLI, "--config", config, "plan", "--transcript", project / "x\ny.jsonl"]),
              2, f"transcript {tmp_path}/pro\\nject/x\\ny.jsonl does not exist")
    _one_line(run([CLI, "--config", config, "plan"]), 1,
              f"no transcript (*.jsonl) in project_dir {tmp_path}/pro\\nject")


def test_a_runaway_poison_pattern_is_matched_in_linear_time(
        make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config(poison_pattern="(a+)+$", poison_threshold=2)
    path = write_config(config, tmp_path / "c.toml")
    b = TranscriptBuilder()
    b.user("a" * 50 + "!")  # `re` backtracks 2^50 times here
    b.say("a" * 200_000 + "b")
    b.user("AAAA")  # a match (case-insensitive, at the end)
    b.say("noted!")
    b.write(config.project_dir / f"{SESSION}.jsonl")

    started = time.monotonic()
    plan = run([CLI, "--config", path, "--json", "plan"], timeout=60)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert json.loads(plan.stdout)["poison_score"] == 1
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(?=policy)policy", "invalid perl operator: (?="),
    ("(refusal) \\1", "invalid escape sequence: \\1"),
    ("(unclosed", "missing ): (unclosed"),
])
def test_a_pattern_the_linear_engine_cannot_run_is_refused_at_config_read(
        pattern: str, reason: str, tmp_path: Path, project_dir: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text(_toml(project_dir=project_dir, state_dir=tmp_path / "state",
                          poison_pattern=pattern))
    for command in ("plan", "status"):
        _one_line(run([CLI, "--config", file, command]), 2,
                  f"poison_pattern: is not a regular expression RE2 accepts (no lookaround or "
                  f"backreferences): {reason}")


def test_status_shows_a_line_break_in_a_reason_or_a_path_escaped(
        config: Config, config_path: Path) -> None:
    requested = run([CLI, "--config", config_path, "request", "--reason", "tidy\nup",
                     "--confirm", "REBUILD"])
    assert requested.returncode == 0, requested.stderr
    stop = {"session_id": SESSION, "hook_event_name": "Stop",
            "transcript_path": f"{config.project_dir}/x\ny.jsonl"}
    hook = run([CLI, "--config", config_path, "hook-stop"], stdin=json.dumps(stop).encode())
    assert hook.returncode == 0 and hook.stderr == "", hook.stderr

    status = run([CLI, "--config", config_path, "status"]).stdout.splitlines()
    assert ["reason", "tidy\\nup"] in [line.split() for line in status], status
    assert f"error      the Stop hook's session_id {SESSION} is not the transcript's (x\\ny)" \
        in [line.strip() for line in status], status
    assert not [line for line in status if line.startswith(("up", "y)"))], status
    history = run([CLI, "--config", config_path, "history"]).stdout.splitlines()
    assert len(history) == 1 and history[0].endswith("  tidy\\nup"), history
