"""The start-up contract of the commands that read a transcript (issue 26): `plan` and `dirty`
through the real console script import what reading and reporting need, and none of the rest
of the engine (the other actions, the operations, doctor, the candidate writer), and print the
report the engine builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kael_thread_rebuild.config import load_config
from kael_thread_rebuild.plan import build_plan
from kael_thread_rebuild.state_layout import CONFIG_ENV
from tests.builder import TranscriptBuilder

CLI = Path(sys.executable).with_name("kael-thread-rebuild")
# What only the other actions need.
NOT_FOR_READING = (
    "kael_thread_rebuild.interfaces.actions", "kael_thread_rebuild.interfaces.action_inputs",
    "kael_thread_rebuild.interfaces.formatters", "kael_thread_rebuild.interfaces.outcomes",
    "kael_thread_rebuild.interfaces.claude_pieces", "kael_thread_rebuild.operations.service",
    "kael_thread_rebuild.operations.store", "kael_thread_rebuild.doctor",
    "kael_thread_rebuild.candidate.writer", "kael_thread_rebuild.switching",
)


def _imported(importtime: str) -> list[str]:
    """Module names from `python -X importtime` output, in the order they were imported."""
    return [line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and line.count("|") == 2]


@pytest.fixture
def one_turn(tmp_path: Path) -> tuple[Path, Path]:
    """A config and a one-turn transcript in its project dir (what bench_plan.py starts)."""
    project = tmp_path / "project"
    project.mkdir()
    builder = TranscriptBuilder()
    builder.first_turn_attachments()
    builder.user("hello")
    builder.tool_call("Read", "x" * 4096, text="reading")
    builder.say("done")
    transcript = builder.write(project / "one-turn.jsonl")
    config = tmp_path / "config.toml"
    config.write_text(f'project_dir = "{project}"\nstate_dir = "{tmp_path / "state"}"\n',
                      encoding="utf-8")
    return config, transcript


@pytest.mark.parametrize("command", ["dirty", "plan"])
def test_a_reading_command_imports_only_what_it_uses(one_turn: tuple[Path, Path],
                                                     command: str) -> None:
    config, transcript = one_turn
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop(CONFIG_ENV, None)
    done = subprocess.run([str(CLI), "--config", str(config), command, "--transcript",
                           str(transcript), "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    imported = _imported(done.stderr)
    assert "kael_thread_rebuild.plan" in imported, "no import was profiled"
    assert [name for name in imported if name.startswith(NOT_FOR_READING)] == []
    report = build_plan(load_config(config), transcript).report
    expected = report.dirty if command == "dirty" else report
    assert json.loads(done.stdout) == expected.model_dump(mode="json")


def test_the_stop_hook_with_nothing_waiting_imports_no_engine(one_turn: tuple[Path, Path]) -> None:
    """Claude Code runs the hook after every reply: when no operation waits for a Stop, it
    answers from the standard library, without pydantic, the config model or the table."""
    config, _ = one_turn
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop(CONFIG_ENV, None)
    done = subprocess.run([str(CLI), "--config", str(config), "hook-stop"], input="{}",
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout == ""
    imported = _imported(done.stderr)
    assert "kael_thread_rebuild.interfaces.hook" in imported, "no import was profiled"
    engine = ("pydantic", "kael_thread_rebuild.config", "kael_thread_rebuild.plan",
              "kael_thread_rebuild.conversation", *NOT_FOR_READING)
    assert [name for name in imported if name.startswith(engine)] == []
