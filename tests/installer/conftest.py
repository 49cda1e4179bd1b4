"""Fixtures of the installer tests: the modules run in-process the way Ansible runs them
(`patch_module_args`), the playbooks through `ansible-playbook`, and a stand-in household: a fake
`claude` in a private tmux server whose names carry DO-NOT-CREATE, with its own config dir in
the test's temp dir (never the real ~/.claude)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.testing import patch_module_args

from tests.support import collection

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
VENV_BIN = Path(sys.executable).parent
REAL_CLAUDE = REPO / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
TRANSCRIPT = REPO / "tests" / "fixtures" / "claude-code-2.1.328" / "plain-chat.jsonl"
MARK = "DO-NOT-CREATE"
#: The start command of the seed's incident: losing any of these flags makes a deaf process.
INCIDENT_FLAGS = ["--channels", "plugin:telegram@claude-plugins-official",
                  "--dangerously-load-development-channels", "server:companion",
                  "--thinking-display", "summarized"]


#: The collection's Python package, as Ansible's collection loader names it.
PACKAGE = "ansible_collections.kael.appliance"


def _collection_package() -> None:
    """Make this checkout importable as the collection's package (`ansible_collections.kael.
    appliance`, whose `plugins/...` are namespace packages), as Ansible imports it."""
    if PACKAGE in sys.modules:
        return
    importlib.import_module("ansible_collections")  # the ansible package's namespace package
    for name, path in (("ansible_collections.kael", []), (PACKAGE, [str(REPO)])):
        package = ModuleType(name)
        package.__path__ = path
        sys.modules[name] = package


def load_module_utils(name: str) -> ModuleType:
    """The collection's module_utils module NAME (`kael_settings`, or a package's module such as
    `kael_claude_code.command_line`), imported as the modules import it."""
    _collection_package()
    return importlib.import_module(f"{PACKAGE}.plugins.module_utils.{name}")


def load_library(name: str) -> ModuleType:
    """The collection's module NAME (`claude_settings`), imported as Ansible runs it."""
    _collection_package()
    return importlib.import_module(f"{PACKAGE}.plugins.modules.{name}")


def load_filters(name: str) -> ModuleType:
    """The collection's filter plugin file NAME (`kael`, `kael_status`)."""
    _collection_package()
    return importlib.import_module(f"{PACKAGE}.plugins.filter.{name}")


RunModule = Callable[..., dict[str, Any]]


@pytest.fixture
def run_module(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> RunModule:
    """Run a module of the collection in-process, as Ansible would; returns its JSON result with
    `failed` set when it called fail_json."""

    def run(name: str, args: dict[str, Any], *, check: bool = False,
            diff: bool = False) -> dict[str, Any]:
        module = load_library(name)
        full = {**args, "_ansible_check_mode": check, "_ansible_diff": diff}
        # Importing any controller code (a filter plugin, ansible.errors) switches module_utils
        # to controller mode for the whole process, where module.warn() prints instead of
        # returning `warnings`. A module on a managed host never runs in that mode.
        monkeypatch.setattr(module_utils_internal, "is_controller", False)
        capsys.readouterr()
        with patch_module_args(full), pytest.raises(SystemExit) as exited:
            module.main()
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        assert (exited.value.code != 0) == bool(result.get("failed")), result
        return result

    return run


def ansible_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "TMUX"))}
    env.update({
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        # The collection as users install it (built from this checkout once per process).
        "ANSIBLE_COLLECTIONS_PATH": str(collection.installed()),
        "PATH": f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}",
    })
    return env


# -- a stand-in household -------------------------------------------------------------------

FAKE_CLAUDE = """#!/bin/bash
# A stand-in for Claude Code: `mcp ...` goes to the real binary; otherwise it registers itself in
# $CLAUDE_CONFIG_DIR/sessions/<pid>.json as Claude Code does, and waits.
if [ "${1:-}" = mcp ]; then exec REAL_CLAUDE "$@"; fi
mkdir -p "$CLAUDE_CONFIG_DIR/sessions"
start=$(cut -d' ' -f22 /proc/$$/stat)
printf '{"pid":%d,"sessionId":"%s","cwd":"%s","procStart":"%s","kind":"interactive"}' \\
  $$ "$FAKE_SESSION_ID" "$PWD" "$start" > "$CLAUDE_CONFIG_DIR/sessions/$$.json"
while :; do sleep 1000; done
"""

FOREIGN_SETTINGS = {
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-done", "timeout": 5}]}],
    },
    "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
    "customThing": {"kept": True},
}


@dataclass
class Household:
    root: Path
    socket: str  # a -L name
    home: Path
    workdir: Path
    config_dir: Path
    bin: Path
    session_id: str
    project_dir: Path
    sessions: list[str] = field(default_factory=list)

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        # tmux gives a new pane the client's PATH, whatever -e says.
        env["PATH"] = f"{self.bin}:/usr/local/bin:/usr/bin:/bin"
        return subprocess.run(["tmux", "-L", self.socket, *args], env=env, text=True,
                              capture_output=True, check=check, timeout=10)

    def start_claude(self, command: str, name: str = "cc") -> int:
        session = f"{MARK}-{name}"
        self.tmux("new-session", "-d", "-s", session, "-c", str(self.workdir),
                  "-e", f"CLAUDE_CONFIG_DIR={self.config_dir}", "-e", f"HOME={self.home}",
                  "-e", f"FAKE_SESSION_ID={self.session_id}", command)
        self.sessions.append(session)
        pid = int(self.tmux("display-message", "-p", "-t", f"{session}:0.0",
                            "#{pane_pid}").stdout)
        deadline = time.monotonic() + 10
        while not (self.config_dir / "sessions" / f"{pid}.json").exists():
            assert time.monotonic() < deadline, "the fake claude did not start"
            time.sleep(0.05)
        return pid

    def stop(self) -> None:
        self.tmux("kill-server", check=False)
        base = os.environ.get("TMUX_TMPDIR") or "/tmp"
        Path(base, f"tmux-{os.getuid()}", self.socket).unlink(missing_ok=True)


def make_household(root: Path) -> Household:
    tag = uuid.uuid4().hex[:8]
    home, workdir, config_dir, bin_dir = (root / n for n in ("home", "work", "claude", "bin"))
    for path in (home, workdir, config_dir, bin_dir):
        path.mkdir(parents=True)
    session_id = str(uuid.uuid4())
    encode = load_module_utils("kael_claude_code.project_dir").encode_project_dir
    project = config_dir / "projects" / encode(os.path.realpath(workdir))
    project.mkdir(parents=True)
    shutil.copy(TRANSCRIPT, project / f"{session_id}.jsonl")
    (config_dir / "settings.json").write_text(json.dumps(FOREIGN_SETTINGS, indent=2) + "\n")
    claude = bin_dir / "claude"
    claude.write_text(FAKE_CLAUDE.replace("REAL_CLAUDE", str(REAL_CLAUDE)))
    claude.chmod(0o755)
    return Household(root, f"kael-test-{tag}-{MARK}", home, workdir, config_dir, bin_dir,
                     session_id, project)


@pytest.fixture
def household(tmp_path: Path) -> Iterator[Household]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    place = make_household(tmp_path / "household")
    try:
        yield place
    finally:
        place.stop()
