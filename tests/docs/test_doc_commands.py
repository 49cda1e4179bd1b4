"""Every `sh` block of README.md and docs/*.md runs as written, or says why it cannot run here.

A block is run when it is not preceded by `<!-- not-run: why -->`; such a block may only hold
commands that are safe on this machine (reading commands of the engine on a test instance). Its
environment is an instance of the test's own: `KAEL_REBUILD_CONFIG` names a config whose
project dir holds a transcript the real Claude Code wrote, and HOME and TMPDIR are the test's.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.docs.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"^<!-- not-run: (?P<why>\S.{8,}?) -->$")
#: Engine subcommands that only read, or write only into a directory the command names.
#: (`python -c`/`-m` of the engine's Python, printing what the package holds, is safe too.)
SAFE = {"dirty", "plan", "candidate", "status", "history", "wait", "claude-pieces", "--help",
        "--version"}
ENGINE = "kael-thread-rebuild"


class Block(NamedTuple):
    page: str
    line: int
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        inside: int | None = None
        for number, line in enumerate(lines, 1):
            if inside is None and line.strip() == "```sh":
                inside = number
            elif inside is not None and line.strip() == "```":
                before = [x for x in lines[:inside - 1] if x.strip()]
                marker = NOT_RUN.match(before[-1].strip()) if before else None
                found.append(Block(page.relative_to(REPO).as_posix(), inside,
                                   "\n".join(lines[inside:number - 1]),
                                   marker.group("why") if marker else None))
                inside = None
    return found


def commands(text: str) -> list[list[str]]:
    """The commands of a block: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n", " ", text)
    return [shlex.split(line, comments=True) for line in joined.splitlines()
            if shlex.split(line, comments=True)]


def unsafe(argv: list[str]) -> str | None:
    """Why ARGV is not safe to run here, or None."""
    if argv[:2] in (["python", "-c"], ["python", "-m"]):
        return None  # the engine's Python, printing what the package holds
    if not argv or argv[0] != ENGINE:
        return f"{argv[0] if argv else '(empty)'} is not the engine"
    words = argv[1:]
    # The first word that is neither an option nor the value of --config is the subcommand.
    values = {i + 1 for i, word in enumerate(words) if word == "--config"}
    command = next((w for i, w in enumerate(words) if not w.startswith("-") and i not in values),
                   None)
    if "--help" in words or "--version" in words or command in SAFE:
        return None
    return f"`{ENGINE} {command}` changes a household"


ALL = blocks()


def test_every_block_runs_or_says_why_not() -> None:
    problems = []
    for block in ALL:
        if block.not_run is None:
            problems += [f"{block.name}: {reason}; mark it `<!-- not-run: why -->` or make it "
                         "runnable" for argv in commands(block.text) if (reason := unsafe(argv))]
    assert not problems, "\n".join(problems)
    assert any(b.not_run is None for b in ALL)


@pytest.mark.parametrize("block", [b for b in ALL if b.not_run is None], ids=lambda b: b.name)
def test_the_block_runs_as_written(block: Block, instance_config: Path, tmp_path: Path) -> None:
    if any(unsafe(argv) for argv in commands(block.text)):
        pytest.fail(f"{block.name} is not safe to run here (see the test above)")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(home), "TMPDIR": str(tmp_path), "KAEL_REBUILD_CONFIG": str(instance_config),
           "LANG": "C.UTF-8"}
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{block.name}:\n{block.text}\n{proc.stdout}\n{proc.stderr}"
