"""One state layout: the names of the state dir's files, the config's environment variable and the
default state dir are spelled in `state_layout.py` only, and the config path is read from the
environment there only. Everything else (the engine, the Stop hook's fast path, the image's
healthcheck and scripts, the installer's roles) takes them from it, or from what `kael-mounts`
prints; the one copy that cannot import it (the host's hook wrapper) must match it."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kael_thread_rebuild import state_layout
from kael_thread_rebuild.state_layout import (
    CONFIG_ENV,
    DEFAULT_STATE_DIR,
    HOOK_LOG,
    STORE_DIRS,
    StateLayout,
    config_path,
    config_path_in,
)

REPO = Path(__file__).resolve().parents[1]
LAYOUT = Path(state_layout.__file__).resolve()
#: Where the engine, the image and the installer live (tests and docs name things to check them).
SOURCES = ("src", "image", "roles")
#: File names spelled whole: anywhere in code they name the state dir's files.
FILE_NAMES = (state_layout.HOOK_LOG, state_layout.WORKER_LOG, state_layout.DAEMON_LOCK,
              state_layout.COORDINATOR_LOCK, CONFIG_ENV, DEFAULT_STATE_DIR)
#: The host's hook wrapper runs where the package is not installed: its copy is checked below.
COPIES = {Path("image/kael-hook"): HOOK_LOG}
#: Written from the code (the action table's words) and checked equal to it by their own tests.
GENERATED = ("_snapshot.json",)
#: A folder of the state dir in a path: `operations/…` or `…/operations` (the bare word is also
#: a check's name and a JSON key).
_DIRS = "|".join(STORE_DIRS)
_DIR_IN_PATH = re.compile(rf"\b({_DIRS})/|/({_DIRS})\b")


def _files() -> Iterator[Path]:
    """The repository's files (tracked, or new and not ignored) under SOURCES, prose aside."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z", "--", *SOURCES], cwd=REPO, capture_output=True, check=True)
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        path = REPO / name
        if path.is_file() and path.suffix != ".md" and path.resolve() != LAYOUT \
                and not path.name.endswith(GENERATED):
            yield path


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (prose: it may name the files it describes)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _python_spellings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(
                node.right, ast.Constant) and node.right.value in STORE_DIRS:
            found.append(f"line {node.lineno}: / {node.right.value!r}")
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) \
                or id(node) in prose:
            continue
        named = [name for name in FILE_NAMES if name in node.value]
        if named or _DIR_IN_PATH.search(node.value):
            found.append(f"line {node.lineno}: {node.value[:60]!r}")
    return found


def _text_spellings(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    copy = COPIES.get(path.relative_to(REPO))
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        named = [name for name in FILE_NAMES if name in code and name != copy]
        if named:
            found.append(f"line {number}: {line.strip()[:60]!r}")
    return found


def test_no_other_file_spells_the_state_layout() -> None:
    spelled = {}
    for path in _files():
        found = _python_spellings(path) if path.suffix == ".py" else _text_spellings(path)
        if found:
            spelled[str(path.relative_to(REPO))] = found
    assert spelled == {}


def test_the_config_path_is_read_from_the_environment_in_one_place() -> None:
    readers = []
    for path in _files():
        if path.suffix == ".py" and re.search(r"environ(\.get)?\W+CONFIG_ENV|getenv\(CONFIG_ENV",
                                              path.read_text(encoding="utf-8")):
            readers.append(str(path.relative_to(REPO)))
    # doctor reads the environment it is handed (a test's, or the container's), never its own
    assert readers == ["src/kael_thread_rebuild/doctor/facts.py"]


@pytest.mark.parametrize(("copy", "name"), sorted(COPIES.items()))
def test_the_host_hook_wrappers_copy_matches(copy: Path, name: str) -> None:
    assert re.search(r'"\$state_dir/' + re.escape(name) + '"', (REPO / copy).read_text())


def test_the_config_path_comes_from_the_command_line_else_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert config_path(None) is None and config_path_in(["hook-stop"]) is None
    monkeypatch.setenv(CONFIG_ENV, "")
    assert config_path(None) is None
    monkeypatch.setenv(CONFIG_ENV, "/etc/kael/env.toml")
    assert config_path(None) == "/etc/kael/env.toml"
    assert config_path_in(["--config", "/etc/kael/given.toml", "hook-stop"]) == \
        "/etc/kael/given.toml"
    assert config_path_in(["hook-stop", "--config"]) == "/etc/kael/env.toml"  # no value: no exit
    layout = StateLayout(Path("/s"))
    assert [layout.operations, layout.backups, layout.candidates, layout.hook_log,
            layout.worker_log, layout.daemon_lock, layout.coordinator_lock] == [
        Path("/s/operations"), Path("/s/backups"), Path("/s/candidates"), Path("/s/hook.log"),
        Path("/s/worker.log"), Path("/s/daemon.lock"), Path("/s/coordinator.lock")]
