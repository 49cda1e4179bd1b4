"""The demo household: a container built like the Molecule households (molecule/images), started
as Molecule starts them, and the playbooks run on it over Ansible's docker connection.

Names come from the environment the Molecule scenarios read, so that the demo can run beside
them on one Docker engine: ``KAEL_MOLECULE_NAME`` (the container is ``<name>-demo``; default
``kael-molecule``), ``KAEL_MOLECULE_TAG`` (the household image ``kael-molecule-household:<tag>``;
default ``bookworm``) and ``KAEL_APPLIANCE_IMAGE`` (default ``kael-thread-rebuild:latest``).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import collection

from .steps import StepFailed, run_logged

REPO = Path(__file__).resolve().parents[3]
USER = "alice"
INSTANCE = "companion"
TARGET = "companion-DO-NOT-CREATE:0.0"
START_COMMAND = 'claude --model opus --append-system-prompt "You are the household\'s companion."'
RESULT = f"/var/lib/kael-molecule/drill-{INSTANCE}.json"
STATE_DIR = f"/var/lib/kael-thread-rebuild/{INSTANCE}"


@dataclass(frozen=True)
class Names:
    container: str
    tag: str
    appliance: str

    @classmethod
    def from_environment(cls) -> Names:
        return cls(container=f"{os.environ.get('KAEL_MOLECULE_NAME') or 'kael-molecule'}-demo",
                   tag=os.environ.get("KAEL_MOLECULE_TAG") or "bookworm",
                   appliance=os.environ.get("KAEL_APPLIANCE_IMAGE")
                   or "kael-thread-rebuild:latest")

    @property
    def image(self) -> str:
        return f"kael-molecule-household:{self.tag}"


def docker(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise StepFailed(f"docker {args[0]}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


class Household:
    """One demo household container; its logs go to LOGS."""

    def __init__(self, names: Names, logs: Path) -> None:
        self.names = names
        self.logs = logs
        self.started = False

    @property
    def name(self) -> str:
        return self.names.container

    def exists(self) -> bool:
        return subprocess.run(["docker", "container", "inspect", self.name],
                              capture_output=True, check=False).returncode == 0

    def build_images(self) -> None:
        """The household image and the saved appliance (molecule/images/build.sh)."""
        env = {**os.environ, "KAEL_MOLECULE_TAG": self.names.tag,
               "KAEL_APPLIANCE_IMAGE": self.names.appliance}
        run_logged([str(REPO / "molecule/images/build.sh"), self.names.tag],
                   self.logs / "build.log", "molecule/images/build.sh", env=env)

    def start(self) -> None:
        """As the Molecule scenarios start theirs: systemd as PID 1, a Docker engine inside,
        never --privileged."""
        if self.exists():
            raise StepFailed(f"a container named {self.name} exists already",
                             f"remove it (docker rm -f -v {self.name}) or set "
                             "KAEL_MOLECULE_NAME to another name")
        self.started = True  # a container of this name is now the demo's own
        docker("run", "--detach", "--name", self.name, "--hostname", "household-demo",
               "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--cap-add", "SYS_PTRACE",
               "--security-opt", "seccomp=unconfined", "--cgroupns", "host",
               "--tmpfs", "/run", "--tmpfs", "/run/lock",
               "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--volume", "/var/lib/docker",
               "--stop-signal", "SIGRTMIN+3", self.names.image, "/lib/systemd/systemd")

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "--force", "--volumes", self.name],
                       capture_output=True, timeout=120, check=False)

    def read(self, path: str) -> bytes:
        done = subprocess.run(["docker", "exec", self.name, "cat", path], capture_output=True,
                              timeout=60, check=False)
        if done.returncode != 0:
            raise StepFailed(f"{path} in {self.name}: {done.stderr.decode().strip()}")
        return done.stdout

    def result(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.read(RESULT))
        return data

    def drill_failure(self) -> str:
        """What a failed drill wrote: its error and the pane as the human saw it."""
        try:
            result = self.result()
        except (StepFailed, ValueError):
            return "(the drill wrote no result)"
        return (f"the drill: {result.get('error')}\n  the pane at the failure:\n"
                f"{result.get('screen')}")

    # -- Ansible over the docker connection ---------------------------------------------------

    def inventory(self) -> Path:
        """The household as a control machine lists it, reached by `docker exec`."""
        archives = sorted((REPO / ".tools/molecule/dist").glob("*.tar.gz"))
        if not archives:
            raise StepFailed("no saved appliance under .tools/molecule/dist",
                             "run molecule/images/build.sh")
        host = {
            "ansible_connection": "community.docker.docker",
            "kael_instances": [{"name": INSTANCE, "tmux_target": TARGET}],
            # What molecule/shared/prepare.yml and drill.yml do to this household.
            "molecule_households": [{
                "instance": INSTANCE, "base": "tmux", "user": USER, "target": TARGET,
                "start_command": START_COMMAND, "drill": "demo_drill.py"}],
        }
        inventory = {"households": {
            "vars": {"kael_image": self.names.appliance, "kael_image_archive": str(archives[-1])},
            "hosts": {self.name: host}}}
        path = self.logs / "inventory.yml"
        path.write_text(json.dumps(inventory, indent=2) + "\n")  # JSON is YAML
        return path

    def playbook(self, playbook: str, log: str) -> None:
        """PLAYBOOK (a file of this checkout, or a playbook of the collection by its FQCN) over
        the household, its output in LOG."""
        venv = REPO / ".venv" / "bin"
        env = {**os.environ, "PATH": f"{venv}:{os.environ.get('PATH', '')}",
               "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
               # A failed task's stdout and stderr (the drill's pane) as lines, not one string.
               "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
               # The collection as users install it, built from this checkout for this run.
               "ANSIBLE_COLLECTIONS_PATH": str(collection.installed())}
        run_logged([str(venv / "ansible-playbook"), "-i", str(self.inventory()),
                    str(REPO / playbook) if playbook.endswith(".yml") else playbook],
                   self.logs / log, playbook, env=env)

    def status_line(self) -> str:
        """The operation's state, asked of the daemon inside the household."""
        return (f"docker exec {self.name} docker exec kael-thread-rebuild-{INSTANCE} "
                f"kael-thread-rebuild --config /etc/kael-thread-rebuild/{INSTANCE}.toml status")

    def attach_line(self) -> str:
        return (f"docker exec -it -e TERM=xterm-256color {self.name} "
                f"runuser -u {USER} -- tmux attach -t {TARGET.split(':')[0]}")
