"""The engine's hot modules (`compiled_modules`: the payload scanner, the classifier and its record
table) run compiled where the install built them (.ci/setup, the image) and interpreted where it
could not: the same files, so the same plans. Checked here on every fixture, lines a parse
refuses and generated transcripts, read by one process and by two (the forked reader's table
pickled through its pipe): the report, the words carried and the record table are the same with
the installed engine and with the package's sources run interpreted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kael_thread_rebuild
from kael_thread_rebuild import compiled_modules
from tests.conftest import ConfigFactory
from tests.engine.test_scanner import _transcripts

PACKAGE = Path(kael_thread_rebuild.__file__).resolve().parent

# Run in a child with one engine or the other on its path: for each transcript, read by one
# process and by two, what the plan reports and carries and what the table holds, as JSON.
PROBE = """
import json, sys
from kael_thread_rebuild import compiled_modules
from kael_thread_rebuild.config import parse_config
from kael_thread_rebuild.conversation import scan
from kael_thread_rebuild.plan import build_plan

scan.PARALLEL_MIN_BYTES = 0  # small files are read by two processes too
config = parse_config(json.loads(sys.argv[1]))
print(json.dumps([compiled_modules.is_compiled(m) for m in compiled_modules.modules()]))
for path in sys.argv[2:]:
    for parallel in (False, True):
        plan = build_plan(config, scan.Path(path), parallel=parallel)
        scanned = scan.scan(scan.Path(path), scan.SpeechRules(), parallel=parallel)
        table = scanned.read.table
        rows = [[table.uuid_of(row), int(table.kinds[row]), table.flags[row],
                 table.parent_row(row), repr(table.times[row]), table.lines[row],
                 table.message_rows(row)] for row in range(len(table))]
        print(json.dumps({"path": path, "parallel": parallel, "facts": plan.facts,
                          "carried": plan.texts(), "rows": rows,
                          "tally": {str(k): v for k, v in sorted(scanned.tally.items())}},
                         ensure_ascii=True, allow_nan=True))
"""


def _probe(python_path: Path | None, config: dict[str, Any],
           paths: list[Path]) -> tuple[list[bool], list[Any]]:
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_path), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(config),
                           *map(str, paths)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    first, *results = done.stdout.splitlines()
    return json.loads(first), [json.loads(line) for line in results]


@pytest.fixture(scope="module")
def interpreted_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's sources without any compiled module, as a pure wheel installs them."""
    root = tmp_path_factory.mktemp("interpreted")
    shutil.copytree(PACKAGE, root / PACKAGE.name,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return root


def test_the_installed_engine_and_the_interpreted_sources_plan_alike(
        interpreted_sources: Path, make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    paths = _transcripts(config, tmp_path)
    settings = config.model_dump(mode="json")
    installed_compiled, installed = _probe(None, settings, paths)
    interpreted_compiled, interpreted = _probe(interpreted_sources, settings, paths)
    assert not any(interpreted_compiled), "the copy of the sources ran a compiled module"
    if os.environ.get("CI"):  # .ci/setup builds them, or fails
        assert all(installed_compiled), dict(zip(compiled_modules.COMPILED, installed_compiled,
                                                 strict=True))
    assert len(installed) == len(interpreted) == 2 * len(paths)
    for mine, theirs in zip(installed, interpreted, strict=True):
        assert mine == theirs, (mine["path"], mine["parallel"])
    assert any(result["rows"] for result in installed)
    assert any(result["facts"]["unreadable_lines"] for result in installed)


def test_every_hot_module_is_known_by_its_source() -> None:
    """What keys the scan cache and what the stale check compares: the .py a module runs, for a
    compiled one the source beside it (its compiled file is a stub that may not change)."""
    for module in compiled_modules.modules():
        source = compiled_modules.source_of(module)
        assert source.suffix == ".py" and source.exists(), module.__file__
        assert source.stem == module.__name__.rsplit(".", 1)[1]
        if compiled_modules.is_compiled(module):
            assert source.parent == Path(str(module.__file__)).parent
