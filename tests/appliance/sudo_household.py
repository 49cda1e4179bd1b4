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
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
             "allow-user.sh": f"{LIBEXEC}/allow-user.sh"}
DOCKER_SOCKET = "/var/run/docker.sock"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
        return self.run(*argv, user=f"{UID}:{UID}", stdin=stdin, env=env, workdir=workdir,
                        timeout=timeout)

    def allow(self, config_path: Path) -> tuple[list[str], str]:
        """image/allow-user.sh for the instance: (the MCP command, the hook command)."""
        done = self.run(f"{LIBEXEC}/allow-user.sh", "--config", str(config_path), "--user", USER,
                        "--name", self.appliance.daemon_name, "--image", self.appliance.image)
        if done.returncode != 0:
            raise RuntimeError(f"allow-user.sh failed: {done.stdout!r} {done.stderr!r}")
        mcp, _, hook = done.stdout.decode().partition("\n\n")
        return mcp.splitlines(), hook.strip()


@contextlib.contextmanager
def sudo_household(root: Path, appliance: engine.Instance,
                   claude: Path | None = None) -> Iterator[SudoHousehold]:
    """The household, with ROOT mounted at the same path and CLAUDE (a Claude Code binary) as
    /usr/local/bin/claude."""
    docker_cli = shutil.which("docker")
    assert docker_cli is not None
    root.chmod(0o755)  # the Claude user inside must reach what lies under it
    name = f"kael-{appliance.name}-household"
    mounts = [(str(root), str(root), "rw"), (DOCKER_SOCKET, DOCKER_SOCKET, "rw"),
              (docker_cli, "/usr/bin/docker", "ro")]
    mounts += [(str(engine.IMAGE_DIR / source), target, "ro")
               for source, target in INSTALLED.items()]
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
