"""What every Molecule verify reads from a household: its instances (the scenario's inventory),
JSON files and commands run over the scenario's own Ansible connection (testinfra)."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import testinfra
import testinfra.utils.ansible_runner

REPO = Path(__file__).resolve().parents[3]
SERVER = "kael-thread-rebuild"
#: The read-only tools the install allows; request, cancel and rollback keep prompting.
READ_ONLY = [f"mcp__{SERVER}__thread_rebuild_{t}" for t in ("doctor", "dirty", "plan", "status")]
PROMPTING = [f"mcp__{SERVER}__thread_rebuild_{t}" for t in ("request", "cancel", "rollback")]
PRISTINE = "/opt/kael-molecule/home"
#: The root-owned wrapper through which the Claude user reaches the appliance (docs/security.md).
WRAPPER = "/usr/local/lib/kael-thread-rebuild/kael-run"


def read_json(host: Any, path: str) -> Any:
    file = host.file(path)
    assert file.exists, f"{path} is missing on {host.backend.get_hostname()}"
    return json.loads(file.content_string)


def run_json(host: Any, *argv: str) -> Any:
    done = host.run(shlex.join(argv))
    assert done.rc == 0, done.stderr
    return json.loads(done.stdout)


def home_of(host: Any, user: str) -> str:
    return str(host.user(user).home)


def instances(host: Any) -> list[dict[str, Any]]:
    """The scenario's instances on HOST: what its people did (molecule_households)."""
    found: list[dict[str, Any]] = host.ansible.get_variables()["molecule_households"]
    return found


def config_of(host: Any, instance: str) -> dict[str, Any]:
    """The instance's TOML config, read by the household's own Python."""
    path = f"/etc/kael-thread-rebuild/{instance}.toml"
    return dict(run_json(host, "python3", "-c", "import json, sys, tomllib; "
                         "print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))))", path))


def daemon_of(host: Any, instance: str) -> dict[str, Any]:
    """`docker inspect` of the instance's daemon container."""
    (daemon,) = run_json(host, "docker", "inspect", f"{SERVER}-{instance}")
    return dict(daemon)


def playbook(name: str, *options: str) -> subprocess.CompletedProcess[str]:
    """One of the collection's playbooks (by its FQCN, from the collection the dependency step
    installed) against the scenario's households, as a control machine runs it (Molecule's
    inventory and connection)."""
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        ["ansible-playbook", "-i", inventory, f"kael.appliance.{name.removesuffix('.yml')}",
         *options],
        capture_output=True, text=True, timeout=900, check=False, cwd=REPO, env=env)


class Run:
    """A finished playbook run: its output and each host's recap."""

    def __init__(self, done: subprocess.CompletedProcess[str]) -> None:
        self.out = done.stdout + done.stderr
        self.returncode = done.returncode
        self.recap = {host: (int(ok), int(changed), int(failed)) for host, ok, changed, failed
                      in re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+"
                                    r"\s+failed=(\d+)", done.stdout, re.MULTILINE)}

    def changed(self, host: Any) -> int:
        return self.recap[host.backend.get_hostname()][1]

    def failed(self, host: Any) -> int:
        return self.recap[host.backend.get_hostname()][2]

    def tail(self) -> str:
        return self.out[-5000:]


def run_playbook(name: str, *options: str) -> Run:
    return Run(playbook(name, *options))


@functools.cache
def run_playbook_once(name: str, *options: str) -> Run:
    """One run over every household, shared by the tests of each host that read it (a run
    per host would take as long again for every further host)."""
    return run_playbook(name, *options)


@pytest.fixture
def households(host: Any) -> list[dict[str, Any]]:
    return instances(host)


@pytest.fixture(scope="module")
def all_hosts() -> list[Any]:
    """Every household of the scenario: the re-converge and uninstall tests run one playbook
    over all of them and then look at each."""
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    runner = testinfra.utils.ansible_runner.AnsibleRunner(inventory)
    return [testinfra.get_host(f"ansible://{name}", ansible_inventory=inventory)
            for name in sorted(runner.get_hosts("households"))]
