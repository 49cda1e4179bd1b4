"""The installer's lint: yamllint and ansible-lint (production profile) clean, every module's
documentation readable, every role variable documented in its argument_specs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.installer.conftest import PLUGINS, REPO, VENV_BIN, ansible_env

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if p.is_dir())
MODULES = sorted(p.stem for p in (PLUGINS / "modules").glob("*.py"))


def run(tmp_path: Path, *argv: str, source: bool = False) -> subprocess.CompletedProcess[str]:
    """ARGV with the built collection installed, or with SOURCE, the checkout itself (ansible-lint
    installs the collection it lints on its own)."""
    env = ansible_env(tmp_path)
    if source:
        del env["ANSIBLE_COLLECTIONS_PATH"]
    return subprocess.run(argv, cwd=REPO, env=env, text=True, capture_output=True, timeout=600,
                          check=False)


def test_yamllint(tmp_path: Path) -> None:
    proc = run(tmp_path, str(VENV_BIN / "yamllint"), "--strict", "roles", "playbooks",
               "inventory", "meta", "galaxy.yml", ".ansible-lint", ".yamllint")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_production(tmp_path: Path) -> None:
    proc = run(tmp_path, str(VENV_BIN / "ansible-lint"), "--profile", "production", "--nocolor",
               "roles", "playbooks", "inventory", source=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("module", MODULES)
def test_module_documentation(tmp_path: Path, module: str) -> None:
    """`ansible-doc kael.appliance.MODULE` from the installed collection: the whole page, its
    shared parts (attributes, author) filled in from the collection's doc fragment."""
    proc = run(tmp_path, str(VENV_BIN / "ansible-doc"), "--json", f"kael.appliance.{module}")
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr
    page = json.loads(proc.stdout)[f"kael.appliance.{module}"]
    doc = page["doc"]
    assert doc["description"] and doc["short_description"] and doc["author"]
    assert {"check_mode", "diff_mode", "platform"} <= set(doc["attributes"])
    assert all(a["description"] and a["support"] for a in doc["attributes"].values())
    assert f"kael.appliance.{module}:" in page["examples"]
    assert page["return"]


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_documented(role: str) -> None:
    root = REPO / "roles" / role
    for part in ("defaults/main.yml", "tasks/main.yml", "handlers/main.yml", "meta/main.yml"):
        assert (root / part).is_file(), f"{role} lacks {part}"
    defaults = yaml.safe_load((root / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((root / "meta" / "argument_specs.yml").read_text())
    # A role with several entry points (kael_status: main, report) documents each default in one.
    options = {name: option for entry in specs["argument_specs"].values()
               for name, option in (entry.get("options") or {}).items()}
    assert set(defaults) <= set(options), set(defaults) - set(options)
    for name, option in options.items():
        assert option.get("description"), f"{role}: {name} is not described"
        if name in defaults and "default" in option:
            assert option["default"] == defaults[name], name
