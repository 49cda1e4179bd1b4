"""A household whose Claude user has no Docker access: a container (Debian with sudo, the user
`household`, uid 1000, in no docker group) that sees the host's Docker socket as root's only,
with the appliance's scripts installed where the installer puts them, root-owned. The user's one
way to the appliance is the fixed wrapper `kael-run` through sudo (image/allow-user.sh writes the
rule and the argv files, as the installer does).

The container shares the host's network (the loopback stand-in API is reachable from Claude Code
inside) and has the test's root dir mounted at the same path, so every path means the same in
the household, in the appliance's containers and in the test. It carries the instance's label,
so the `appliance` fixture removes it with the instance's other containers, also after a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from kael_thread_rebuild.config import Config
from tests.drill import procs
from tests.guard import MARK, TEST_SOCKET_PREFIX
from tests.support import collection
from tests.support.claude_env import ClaudeEnv, make_claude_env

from . import engine

CONTAINERFILE = Path(__file__).with_name("household-image") / "Containerfile"
HOUSEHOLD_IMAGE = "kael-test-sudo-household:bookworm"
BASE_IMAGE = "kael-base:bookworm"
LIBEXEC = "/usr/local/lib/kael-thread-rebuild"
WRAPPER = f"{LIBEXEC}/kael-run"
USER, UID = "household", 1000
#: What the installer installs, root-owned, from image/ (the test mounts them read-only).
INSTALLED = {"kael-run": WRAPPER, "kael-hook": "/usr/local/bin/kael-hook",
             "lib.sh": f"{LIBEXEC}/lib.sh", "mcp-command.sh": f"{LIBEXEC}/mcp-command.sh",
             "allow-user.sh": f"{LIBEXEC}/allow-user.sh",
             "run-doctor.sh": f"{LIBEXEC}/run-doctor.sh"}
DOCKER_SOCKET = "/var/run/docker.sock"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VENV_BIN = engine.REPO / ".venv" / "bin"


def household_image() -> str:
    subprocess.run(["docker", "build", "-q", "-f", str(CONTAINERFILE), "--build-arg",
                    f"BASE={BASE_IMAGE}", "-t", HOUSEHOLD_IMAGE, str(CONTAINERFILE.parent)],
                   capture_output=True, check=True, timeout=600)
    return HOUSEHOLD_IMAGE


@dataclass
class SudoHousehold:
    name: str
    appliance: engine.Instance

    def run(self, *argv: str, user: str = "root", stdin: bytes = b"",
            env: Mapping[str, str] | None = None, workdir: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        """ARGV in the household as USER (root or the Claude user)."""
        options = ["-i", "-u", user]
        if workdir is not None:
            options += ["-w", str(workdir)]
        for key, value in (env or {}).items():
            options += ["-e", f"{key}={value}"]
        return subprocess.run(["docker", "exec", *options, self.name, *argv], input=stdin,
                              capture_output=True, timeout=timeout, check=False)

    def as_claude(self, *argv: str, stdin: bytes = b"",
                  env: Mapping[str, str] | None = None, workdir: Path | None = None,
                  timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        # By name: docker exec then gives it the supplementary groups /etc/group lists.
        return self.run(*argv, user=USER, stdin=stdin, env=env, workdir=workdir,
                        timeout=timeout)

    def allow(self, config_path: Path) -> tuple[list[str], str]:
        """image/allow-user.sh for the instance: (the MCP command, the hook command)."""
        done = self.run(f"{LIBEXEC}/allow-user.sh", "--config", str(config_path), "--user", USER,
                        "--name", self.appliance.daemon_name, "--image", self.appliance.image)
        if done.returncode != 0:
            raise RuntimeError(f"allow-user.sh failed: {done.stdout!r} {done.stderr!r}")
        mcp, _, hook = done.stdout.decode().partition("\n\n")
        return mcp.splitlines(), hook.strip()

    def doctor(self, config_path: Path) -> dict[str, Any]:
        """image/run-doctor.sh --json, run by root in the household: doctor's checks by name."""
        done = self.run(f"{LIBEXEC}/run-doctor.sh", "--config", str(config_path), "--user",
                        f"{UID}:{UID}", "--image", self.appliance.image, "--", "--json")
        try:
            report = orjson.loads(done.stdout)
        except orjson.JSONDecodeError:
            raise RuntimeError(f"run-doctor.sh gave no report: {done!r}") from None
        return {check["name"]: check for check in report["checks"]}

    def play(self, work: Path, plays: list[dict[str, Any]], variables: Mapping[str, Any],
             *options: str, name: str = "vars") -> subprocess.CompletedProcess[str]:
        """PLAYS run by Ansible as root in the household over Docker's connection, with the
        extra VARIABLES (written to WORK/NAME.json) and ansible-playbook's OPTIONS; its files
        and Ansible's own under WORK."""
        inventory = work / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"household": {"hosts": {self.name: {
            "ansible_connection": "community.docker.docker",
            "ansible_python_interpreter": "/usr/bin/python3"}}}}))
        play = work / "play.yml"
        play.write_text(yaml.safe_dump(plays))
        extra = work / f"{name}.json"
        extra.write_text(orjson.dumps(dict(variables)).decode())
        env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
        env.update({"ANSIBLE_CONFIG": str(engine.REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                    "ANSIBLE_COLLECTIONS_PATH": str(collection.installed()),
                    "ANSIBLE_PIPELINING": "1", "ANSIBLE_HOME": str(work / "ansible-home"),
                    "ANSIBLE_LOCAL_TEMP": str(work / "ansible-local"),
                    "PATH": f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}"})
        return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
                               str(play), "-e", f"@{extra}", *options], cwd=engine.REPO,
                              env=env, capture_output=True, text=True, timeout=900,
                              check=False)

    def join_docker_group(self) -> None:
        """What an earlier install did: the Claude user in the group that owns the socket."""
        group = str(Path(DOCKER_SOCKET).stat().st_gid)
        for argv in (["groupadd", "--gid", group, "docker"], ["gpasswd", "--add", USER, "docker"]):
            done = self.run(*argv)
            if done.returncode != 0:
                raise RuntimeError(f"{argv[0]} failed: {done.stderr!r}")


def give_to_claude_user(*paths: Path) -> None:
    """chown -R the Claude user's uid:gid (same uid inside the household as on the host)."""
    for path in paths:
        for walk_root, dirs, files in os.walk(path):
            for entry in (walk_root, *(os.path.join(walk_root, f) for f in dirs + files)):
                os.chown(entry, UID, UID)


def claude_instance(root: Path, instance: str, base_url: str,
                    **overrides: Any) -> tuple[ClaudeEnv, Config, Path]:
    """A pointer-base instance over a real Claude Code layout under ROOT (its config dir,
    project dir, workdir; state dir and pointer), owned by the Claude user: (the Claude env, the
    config, the config's path)."""
    claude = make_claude_env(root / "claude", base_url)
    claude.project_dir.mkdir(parents=True)
    state, pointer = root / "state", root / "pointer" / "session"
    state.mkdir(mode=0o700)
    pointer.parent.mkdir()
    pointer.write_text("none-yet\n")
    config_path = root / "kael.toml"
    config = procs.write_config(config_path, {
        "instance": instance, "project_dir": claude.project_dir,
        "claude_config_dir": claude.config_dir, "claude_workdir": claude.cwd,
        "state_dir": state, "activation": "pointer", "resume_pointer_path": pointer,
        "tmux_target": f"{MARK}-unused:0.0", "tmux_socket": f"{TEST_SOCKET_PREFIX}{MARK}-unused",
        **overrides})
    config_path.chmod(0o644)
    give_to_claude_user(root / "claude", state, pointer.parent)
    return claude, config, config_path


@contextlib.contextmanager
def sudo_household(root: Path, appliance: engine.Instance, claude: Path | None = None,
                   installed: Sequence[str] = tuple(INSTALLED)) -> Iterator[SudoHousehold]:
    """The household, with ROOT mounted at the same path, CLAUDE (a Claude Code binary) as
    /usr/local/bin/claude and the INSTALLED files of image/ where the installer puts them."""
    docker_cli = shutil.which("docker")
    assert docker_cli is not None
    root.chmod(0o755)  # the Claude user inside must reach what lies under it
    name = f"kael-{appliance.name}-household"
    mounts = [(str(root), str(root), "rw"), (DOCKER_SOCKET, DOCKER_SOCKET, "rw"),
              (docker_cli, "/usr/bin/docker", "ro")]
    mounts += [(str(engine.IMAGE_DIR / source), INSTALLED[source], "ro") for source in installed]
    if claude is not None:
        mounts.append((str(claude.resolve()), "/usr/local/bin/claude", "ro"))
    volumes: Sequence[str] = [arg for source, target, mode in mounts
                              for arg in ("-v", f"{source}:{target}:{mode}")]
    subprocess.run(["docker", "run", "-d", "--name", name, "--network", "host",
                    "--label", f"{engine.LABEL}.instance={appliance.name}",
                    "--label", f"{engine.LABEL}.role=test-household", *volumes,
                    household_image(), "sleep", "infinity"],
                   capture_output=True, check=True, timeout=120)
    yield SudoHousehold(name, appliance)
