"""Issue 27: the installer as the collection kael.appliance, as an operator gets it: one tarball
from `ansible-galaxy collection build`, installed without a network into a directory of their
own, its playbooks run by their fully qualified names from wherever their inventory lives."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import tomllib
import uuid
from pathlib import Path

import pytest
import yaml

from kael_thread_rebuild import __version__
from tests.installer.conftest import REPO, VENV_BIN, Household, ansible_env
from tests.installer.test_playbooks import INCIDENT_START, inventory, needs_real_claude
from tests.support import collection

GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
#: What the roles put on a household from image/ (kael_image_dir).
IMAGE_FILES = ["image/kael-hook", "image/lib.sh", "image/mcp-command.sh", "image/kael-run",
               "image/advisor/mcp-command.sh"]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collection.build(tmp_path_factory.mktemp("dist"))


def members(tarball: Path) -> list[str]:
    with tarfile.open(tarball) as archive:
        return [m.name for m in archive.getmembers() if m.isfile()]


def test_the_collection_is_the_appliances_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (GALAXY["namespace"], GALAXY["name"]) == ("kael", "appliance")
    assert GALAXY["version"] == project["version"] == __version__


def test_the_tarball_holds_what_users_run_and_nothing_else(tarball: Path) -> None:
    assert tarball.name == f"kael-appliance-{GALAXY['version']}.tar.gz"
    names = members(tarball)
    wanted = [str(p.relative_to(REPO)) for pattern in (
        "plugins/modules/*.py", "plugins/module_utils/**/*.py", "plugins/filter/*.py",
        "plugins/action/*.py", "roles/*/tasks/main.yml", "roles/*/meta/argument_specs.yml",
        "roles/*/README.md", "playbooks/*.yml", "meta/*") for p in REPO.glob(pattern)]
    missing = sorted(set(wanted + IMAGE_FILES + ["README.md", "MANIFEST.json", "FILES.json"])
                     - set(names))
    assert missing == []
    assert {"playbooks/install.yml", "playbooks/doctor.yml", "playbooks/uninstall.yml",
            "playbooks/status.yml"} <= set(names)
    stray = [n for n in names if n.split("/")[0] in {"src", "tests", "molecule", "benchmarks",
                                                      ".ci", ".venv", ".tools", "examples"}
             or n in {"pyproject.toml", "setup.py"}
             or "__pycache__" in n or n.endswith((".pyc", ".whl", ".tar.gz"))]
    assert stray == []
    assert tarball.stat().st_size < 1_000_000


def test_its_python_needs_are_listed_for_an_execution_environment() -> None:
    environment = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    requirements = REPO / environment["dependencies"]["python"]
    needs = {line.strip() for line in requirements.read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert {"requests", "urllib3"} <= needs
    assert [c["name"] for c in environment["dependencies"]["galaxy"]["collections"]] == [
        "community.docker"]


def operator_env(tmp_path: Path) -> dict[str, str]:
    """An operator's control machine: no collection path set, no ansible.cfg of ours; collections
    go where ansible-galaxy puts them by default (under ANSIBLE_HOME, the test's own)."""
    env = ansible_env(tmp_path)
    del env["ANSIBLE_COLLECTIONS_PATH"], env["ANSIBLE_CONFIG"]
    return env


def test_an_operator_installs_it_offline_and_runs_it_by_fqcn(
        tarball: Path, tmp_path: Path, household: Household) -> None:
    """The operator's own inventory repository, on a control machine without any network (a
    network namespace of its own): `ansible-galaxy collection install TARBALL`, then
    `ansible-playbook kael.appliance.install -i inventory.yml --check` from that repository.
    The collection's dependency (community.docker, a version range in galaxy.yml) is the one
    Ansible brings."""
    needs_real_claude()
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    offline = [unshare, "--net"]
    probe = subprocess.run([*offline, str(VENV_BIN / "python"), "-c",
                            "import socket; socket.create_connection(('1.1.1.1', 443), 2)"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert probe.returncode != 0 and "unreachable" in probe.stderr, probe.stderr
    operator = tmp_path / "inventory-repo"
    operator.mkdir()
    shutil.copy(tarball, operator)
    household.start_claude(INCIDENT_START)
    inv = inventory(tmp_path, household, f"kael-test-{uuid.uuid4().hex[:6]}",
                    kael_appliance_enabled=False, kael_doctor_on_host=True,
                    kael_engine_command=[str(VENV_BIN / "kael-thread-rebuild")])
    inv.rename(operator / "inventory.yml")
    env = operator_env(tmp_path)

    installed = subprocess.run(
        [*offline, str(VENV_BIN / "ansible-galaxy"), "collection", "install", tarball.name],
        cwd=operator, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert f"kael.appliance:{GALAXY['version']} was installed successfully" in installed.stdout
    assert "'community.docker:" in installed.stdout and "already installed" in installed.stdout
    assert GALAXY["dependencies"] == {"community.docker": ">=4.0.0,<6.0.0"}
    root = Path(env["ANSIBLE_HOME"]) / "collections" / "ansible_collections" / "kael" / "appliance"
    manifest = json.loads((root / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["collection_info"]["version"] == GALAXY["version"]

    settings = household.config_dir / "settings.json"
    original = settings.read_bytes()
    checked = subprocess.run(
        [*offline, str(VENV_BIN / "ansible-playbook"), "kael.appliance.install", "-i",
         "inventory.yml", "--check"], cwd=operator, env=env, capture_output=True, text=True,
        timeout=600, check=False)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "TASK [kael.appliance.kael_claude : " in checked.stdout
    assert re.search(r"localhost\s+: ok=\d+\s+changed=[1-9]\d*\s+unreachable=0\s+failed=0",
                     checked.stdout), checked.stdout[-2000:]  # what a real run would change
    assert settings.read_bytes() == original  # check mode
    assert sorted(p.name for p in operator.iterdir()) == sorted([tarball.name, "inventory.yml"])


@pytest.mark.parametrize("present", [True, False])
def test_a_relative_image_archive_is_found_beside_the_inventory(tmp_path: Path,
                                                                present: bool) -> None:
    """`kael_image_archive: dist/…` means beside the inventory, wherever the collection is
    installed and whichever directory the play runs from; a missing one fails in one line that
    says where it looked."""
    operator = tmp_path / "inventory-repo"
    (operator / "dist").mkdir(parents=True)
    archive = operator / "dist" / "kael-thread-rebuild-0.1.0.tar.gz"
    if present:
        archive.write_bytes(b"")
    (operator / "inventory.yml").write_text(yaml.safe_dump({"households": {
        "vars": {"kael_image_archive": "dist/kael-thread-rebuild-0.1.0.tar.gz"},
        "hosts": {"localhost": {"ansible_connection": "local",
                                "ansible_python_interpreter": str(VENV_BIN / "python")}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "households", "gather_facts": True, "gather_subset": ["min"], "tasks": [
            {"name": "Find the archive", "ansible.builtin.include_role": {
                "name": "kael.appliance.kael_appliance", "tasks_from": "archive.yml"}},
            {"name": "Show it", "ansible.builtin.debug": {"var": "kael_appliance_archive"}}]}]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(operator / "inventory.yml"),
         str(tmp_path / "play.yml")], cwd=elsewhere, env=ansible_env(tmp_path),
        capture_output=True, text=True, timeout=300, check=False)
    if present:
        assert done.returncode == 0, done.stdout[-3000:]
        assert f'"kael_appliance_archive": "{archive}"' in done.stdout
    else:
        assert done.returncode != 0
        assert (f"kael_image_archive dist/kael-thread-rebuild-0.1.0.tar.gz: no such file on the "
                f"control machine (looked for {archive};") in done.stdout
