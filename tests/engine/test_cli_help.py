"""`--help`, `COMMAND --help` and `--version` are answered without importing the engine, and say
what the parser built from the action table says."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from kael_thread_rebuild.interfaces import cli
from kael_thread_rebuild.interfaces.cli_spec import SNAPSHOT, recorded
from kael_thread_rebuild.state_layout import CONFIG_ENV

CLI = Path(sys.executable).with_name("kael-thread-rebuild")
COMMANDS = [spec["name"] for spec in recorded()]
# Modules only the engine's parser needs: the help path must not import them.
ENGINE_MODULES = ("pydantic", "kael_thread_rebuild.interfaces.actions",
                  "kael_thread_rebuild.config")


def test_the_snapshot_is_what_the_action_table_says() -> None:
    assert json.loads(SNAPSHOT.read_bytes()) == recorded(), (
        "run `python -m kael_thread_rebuild.interfaces.cli_spec` to record it again")


def _engine_help(words: list[str]) -> str:
    """What the parser built from the action table prints for WORDS."""
    printed = io.StringIO()
    with redirect_stdout(printed), pytest.raises(SystemExit):
        cli.build_parser().parse_args(words)
    return printed.getvalue()


@pytest.mark.parametrize("words", [["--help"], ["--version"],
                                   *([name, "--help"] for name in COMMANDS)],
                         ids=lambda words: " ".join(words))
def test_help_through_the_console_script_imports_no_engine(words: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop(CONFIG_ENV, None)
    done = subprocess.run([str(CLI), *words], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    os.environ["COLUMNS"] = "100"
    try:
        assert done.stdout == _engine_help(words)
    finally:
        del os.environ["COLUMNS"]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert imported, "no import was profiled"
    assert not [name for name in ENGINE_MODULES if name in imported]

