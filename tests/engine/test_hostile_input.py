"""Hostile input through the real entry points: lines nested tens of thousands of levels deep.
Each gives one line (or a reported unreadable line) and never a traceback, a hang or an unbounded
read."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import service
from tests.builder import SESSION, TranscriptBuilder
from tests.test_mcp_server import config, config_path

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
