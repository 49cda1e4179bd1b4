"""docs/architecture.md is what the generator writes from the source tree (its prose kept): the
tables of modules, of imports and of actions cannot drift from the code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kael_thread_rebuild import docs_architecture as arch
from kael_thread_rebuild.interfaces.actions import ACTIONS
from tests.docs.conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
# The engine: it reads and writes transcripts, and knows nothing of how a switch is run.
ENGINE = {"conversation", "transcript", "candidate", "plan"}
NOT_FOR_THE_ENGINE = {"operations", "switching", "interfaces", "daemon", "doctor"}


def test_the_committed_page_is_what_the_generator_writes() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "kael_thread_rebuild.docs_architecture", "--prose-from", str(PAGE)],
        capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert PAGE.read_text(encoding="utf-8") == printed, (
        f"docs/architecture.md is stale: run `{arch.COMMAND}`")


def test_every_module_has_its_row_and_every_action_its_line() -> None:
    page = PAGE.read_text(encoding="utf-8")
    package = REPO / "src" / "kael_thread_rebuild"
    for path in package.rglob("*.py"):
        relative = path.relative_to(package)
        if path.name != "__init__.py":
            assert f"| `{relative.as_posix()}` | " in page, relative
        elif len(relative.parts) > 1:
            assert f"| **`{relative.parent.as_posix()}/`** | " in page, relative
    for action in ACTIONS:
        assert f"\n| {action.name} | " in page, action.name


def test_the_prose_is_kept_and_the_rest_rewritten(tmp_path: Path) -> None:
    page = PAGE.read_text(encoding="utf-8")
    prose = arch.read_prose(page)
    assert set(prose) == {s.name for s in arch.SECTIONS if isinstance(s, arch.Prose)}
    edited = page.replace("One folder per job", "One folder for each job").replace(
        "| `plan.py` | ", "| `plan.py` | stale words; ")
    target = tmp_path / "architecture.md"
    target.write_text(edited, encoding="utf-8")
    assert arch.main(["--write", str(target)]) == 0
    written = target.read_text(encoding="utf-8")
    assert "One folder for each job" in written and "stale words" not in written
    assert written == page.replace("One folder per job", "One folder for each job")


def test_a_module_without_a_docstring_is_refused() -> None:
    with pytest.raises(ValueError, match="no docstring"):
        arch.summary(ast.get_docstring(ast.parse("x = 1\n")), Path("new.py"))
    assert arch.summary("First. Second.\n\nMore.", Path("m.py")) == "First."
    assert arch.summary("One line\ncontinued (spec §8).\n", Path("m.py")) == (
        "One line continued (spec §8).")


def test_relative_imports_are_resolved_to_their_package() -> None:
    units = {"conversation", "transcript", "errors", "plan"}
    source = ("from ..transcript import reader\nfrom .table import Kind\n"
              "from .. import errors\nif TYPE_CHECKING:\n    from ..plan import Plan\n")
    path = arch.PACKAGE / "conversation" / "made_up.py"
    module = arch.Module(path.relative_to(arch.PACKAGE), "x")
    tree = ast.parse(source)
    type_only = arch._type_only_nodes(tree)
    found = {(arch._unit_of(dotted, units), id(node) in type_only)
             for node in ast.walk(tree) for dotted in arch._imported(node, module.path)}
    assert found == {("transcript", False), ("conversation", False), ("errors", False),
                     ("plan", True)}


def test_the_engine_imports_neither_operations_nor_switching() -> None:
    """What the page's table shows, held: the engine never reaches the switch machinery."""
    for module in arch.modules():
        if module.unit in ENGINE:
            assert not (module.imports | module.type_imports) & NOT_FOR_THE_ENGINE, module.path
