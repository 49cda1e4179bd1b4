"""Each roles/<role>/README.md is what the generator writes from the role's argument spec and
meta: every variable of every entry point (suboptions too) is on it with its default, its
Ansible markup is Markdown, and a spec changed without regenerating is caught by `--check`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kael_thread_rebuild import docs_roles
from tests.docs.conftest import REPO

ROLES = REPO / "roles"
ROLE_NAMES = sorted(path.name for path in ROLES.iterdir() if path.is_dir())
# Ansible's markup commands, as ansible-doc reads them (a letter, then a parenthesis).
RAW_MARKUP = re.compile(r"(?<![\w`])(?:RV|[CIBUOVEML])\(")


def _check(roles: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kael_thread_rebuild.docs_roles", "--check", str(roles)],
        capture_output=True, text=True, cwd=REPO)


def _spec(role: str) -> dict[str, Any]:
    path = ROLES / role / "meta" / "argument_specs.yml"
    specs: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))["argument_specs"]
    return specs


def _options(options: dict[str, Any] | None, parents: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Every option under OPTIONS, suboptions too, as (its parents, its name, its spec)."""
    for name, option in (options or {}).items():
        yield parents, name, option
        yield from _options(option.get("options"), (*parents, name))


def _table(readme: str, entry: str, parents: tuple[str, ...]) -> list[str]:
    """The rows of the table of ENTRY's variables, or of the keys of the option at PARENTS."""
    lines = readme.splitlines()
    if parents:
        starts = [i for i, line in enumerate(lines) if line.startswith("#### Keys of ")
                  and re.findall(r"`([^`]+)`", line)[:len(parents)] == list(reversed(parents))
                  and (entry == "main") != line.endswith(f"(`{entry}`)")]
    else:
        starts = [i for i, line in enumerate(lines) if line == f"### Variables of `{entry}`"]
    assert len(starts) == 1, (entry, parents)
    rows = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("| `"):
            rows.append(line)
    return rows


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_the_committed_readme_is_what_the_generator_writes(role: str) -> None:
    written = docs_roles.readmes(ROLES)[ROLES / role / "README.md"]
    readme = ROLES / role / "README.md"
    assert readme.is_file() and readme.read_text(encoding="utf-8") == written, (
        f"roles/{role}/README.md is stale: run `{docs_roles.COMMAND}`")


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_every_variable_is_in_its_table_with_its_default(role: str) -> None:
    readme = (ROLES / role / "README.md").read_text(encoding="utf-8")
    assert f"\n# kael.appliance.{role}\n" in readme
    for entry, spec in _spec(role).items():
        assert f"### `{entry}`" in readme and spec["short_description"] in readme
        for parents, name, option in _options(spec.get("options")):
            rows = [row for row in _table(readme, entry, parents)
                    if row.startswith(f"| `{name}` | ")]
            assert len(rows) == 1, (entry, parents, name)
            if option.get("required"):
                assert "| **required** |" in rows[0], (entry, parents, name)
            elif "default" in option:
                shown = json.dumps(option["default"], ensure_ascii=False).replace("|", "\\|")
                assert f"| `{shown}` |" in rows[0], (entry, parents, name)
            else:
                assert " | - | " in rows[0], (entry, parents, name)


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_no_ansible_markup_is_left_raw(role: str) -> None:
    readme = (ROLES / role / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", readme, flags=re.DOTALL)
    prose = re.sub(r"`[^`]*`", "", prose)
    assert not RAW_MARKUP.findall(prose)


def test_the_markup_becomes_markdown() -> None:
    text = ("C(a|b) O(kael_advisor=[]) V(present) E(HOME) I(once) B(never) U(https://x.test) "
            "L(the docs,https://y.test) C(#UID ALL=(root) NOPASSWD) plain <tag> and *stars*.")
    assert docs_roles.markdown(text) == (
        "`a|b` `kael_advisor=[]` `present` `HOME` *once* **never** <https://x.test> "
        "[the docs](https://y.test) `#UID ALL=(root) NOPASSWD` plain \\<tag> and \\*stars\\*.")


def test_the_example_is_a_play_of_the_collection_up_to_the_role() -> None:
    readme = (ROLES / "kael_doctor" / "README.md").read_text(encoding="utf-8")
    example = yaml.safe_load(readme.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert example[0]["hosts"] == "households"
    assert [item["role"] for item in example[0]["roles"]] == [
        "kael.appliance.kael_detect", "kael.appliance.kael_doctor"]
    assert "`ansible-playbook kael.appliance.install -i inventory.yml`" in readme
    assert "](../../docs/installer.md)" in readme


def test_a_changed_spec_is_named_by_check_until_written(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    shutil.copytree(ROLES / "kael_doctor", roles / "kael_doctor")
    shutil.copytree(REPO / "playbooks", tmp_path / "playbooks")
    assert docs_roles.main(["--write", str(roles)]) == 0
    assert _check(roles).returncode == 0

    spec = roles / "kael_doctor" / "meta" / "argument_specs.yml"
    text = spec.read_text(encoding="utf-8")
    assert "default: true" in text
    spec.write_text(text.replace("default: true", "default: false", 1), encoding="utf-8")
    checked = _check(roles)
    assert checked.returncode == 1
    assert f"{roles / 'kael_doctor' / 'README.md'} is stale" in checked.stdout
    assert docs_roles.COMMAND in checked.stdout

    assert docs_roles.main(["--write", str(roles)]) == 0
    assert _check(roles).returncode == 0
    assert "| `kael_doctor_required` | bool | `false` |" in (
        roles / "kael_doctor" / "README.md").read_text(encoding="utf-8")


def test_an_undescribed_variable_is_refused_naming_its_role(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    shutil.copytree(ROLES / "kael_doctor", roles / "kael_doctor")
    spec = roles / "kael_doctor" / "meta" / "argument_specs.yml"
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["argument_specs"]["main"]["options"]["kael_doctor_new"] = {"type": "bool"}
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    checked = _check(roles)
    assert checked.returncode == 2
    assert "kael_doctor" in checked.stderr and "kael_doctor_new" in checked.stderr
    assert "description" in checked.stderr
