"""The collection's module_utils package `kael_claude_code`: byte-identical copies of the engine's
standard-library Claude Code modules, written by `python -m
kael_thread_rebuild.claude_code.role_utils --write`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from kael_thread_rebuild.claude_code import role_utils
from kael_thread_rebuild.claude_code.role_utils import PACKAGE, SHIPPED
from tests.installer.conftest import PLUGINS, REPO

SOURCE = REPO / "src" / "kael_thread_rebuild" / "claude_code"
MODULE_UTILS = PLUGINS / "module_utils"


def test_the_collection_holds_byte_identical_copies() -> None:
    folder = MODULE_UTILS / PACKAGE
    assert sorted(p.name for p in folder.glob("*.py")) == sorted(["__init__.py", *SHIPPED])
    for name in SHIPPED:
        copy = folder / name
        assert not copy.is_symlink(), f"{copy} must be a copy (Ansible ships files, not links)"
        assert copy.read_bytes() == (SOURCE / name).read_bytes(), (
            f"{copy} differs from {SOURCE / name}: run `{role_utils.COMMAND} --write "
            "plugins/module_utils`")
    assert role_utils.stale(MODULE_UTILS) == []


def test_the_generator_writes_the_copies_and_check_finds_a_stale_one(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kael_thread_rebuild.claude_code.role_utils",
                               *args], capture_output=True, text=True, timeout=60, check=False)

    assert run("--check", str(tmp_path)).returncode == 1  # nothing there yet
    assert run("--write", str(tmp_path)).returncode == 0
    written = tmp_path / PACKAGE
    for copy in (MODULE_UTILS / PACKAGE).glob("*.py"):
        assert (written / copy.name).read_bytes() == copy.read_bytes()
    assert run("--check", str(tmp_path)).returncode == 0
    edited = written / "command_line.py"
    edited.write_text(edited.read_text() + "# edited by hand\n")
    (written / "leftover.py").write_text("")
    checked = run("--check", str(tmp_path))
    assert checked.returncode == 1
    assert str(edited) in checked.stdout and "leftover.py" in checked.stdout
    assert run("--write", str(tmp_path)).returncode == 0
    assert role_utils.stale(tmp_path) == [] and not (written / "leftover.py").exists()


def test_the_shipped_modules_import_only_the_standard_library_and_each_other() -> None:
    """Ansible runs them on the household, where only Python (3.9+) is installed."""
    siblings = {name.removesuffix(".py") for name in SHIPPED}
    for name in SHIPPED:
        tree = ast.parse((SOURCE / name).read_text(), feature_version=(3, 9))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module in siblings, f"{name}: from .{node.module}"
            elif isinstance(node, ast.ImportFrom | ast.Import):
                modules = [node.module] if isinstance(node, ast.ImportFrom) else [
                    alias.name for alias in node.names]
                for module in modules:
                    top = (module or "").partition(".")[0]
                    assert top in sys.stdlib_module_names, f"{name} imports {module}"
