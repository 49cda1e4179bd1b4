"""The systemd drill's stand-in household: Debian with systemd as PID 1 in a container (never
`--privileged`), its system bus reachable through a host dir bind-mounted on its `/run/dbus`,
the real Claude Code and the example start script (`examples/systemd/claude-start`) bind-mounted
in, and the test's root dir mounted at the same path, so paths mean the same on both sides.

The household shares the host's network namespace: the loopback stand-in API of the tests is
then reachable from Claude Code inside it.

Everything is marked: container names contain `DO-NOT-CREATE` and carry `LABEL`, unit names
contain `DO-NOT-CREATE`, and a container is removed on exit, also after a failure.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.guard import MARK

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "systemd"
START_SCRIPT = EXAMPLES / "claude-start"
EXAMPLE_UNIT = EXAMPLES / "claude.service"
CONTAINERFILE = REPO / "image" / "systemd-household" / "Containerfile"

BASE_IMAGE = "kael-base:bookworm"
HOUSEHOLD_IMAGE = "kael-test-household:bookworm"
APPLIANCE_IMAGE = "kael-thread-rebuild:latest"
LABEL = f"io.kael-thread-rebuild.test={MARK}"
BOOT_TIMEOUT_SECONDS = 60.0
USER_NAME, USER_UID = "household", 1000
#: This checkout's code and Python packages, and the drill's client, mounted read-only in the
#: household for the user-bus drill (that bus exists only inside the household).
CLIENT = Path(__file__).with_name("appliance_client.py")
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
DRILL_SRC, DRILL_SITE, DRILL_CLIENT = "/opt/drill/src", "/opt/drill/site", "/opt/drill/client.py"
CODE_MOUNTS = {REPO / "src": DRILL_SRC, SITE_PACKAGES: DRILL_SITE, CLIENT: DRILL_CLIENT}

#: systemd as PID 1 in a container on these machines (see the environment notes).
SYSTEMD_OPTIONS = ("--cap-add", "SYS_ADMIN", "--cgroupns=host",
                   "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--tmpfs", "/run",
                   "--tmpfs", "/run/lock", "--stop-signal", "SIGRTMIN+3")
#: The appliance's hardening (spec: appliance.md).
HARDENING = ("--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--network", "none", "--tmpfs", "/tmp")


def docker(*args: str, check: bool = True, timeout: float = 120.0,
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          input=stdin, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])} … exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-2000:]}")
    return proc


def docker_reachable() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return docker("info", check=False, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _image_exists(name: str) -> bool:
    return docker("image", "inspect", name, check=False).returncode == 0


def _run_script(*argv: str, timeout: float) -> None:
    proc = subprocess.run(list(argv), cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {(proc.stdout + proc.stderr)[-2000:]}")


def household_image() -> str:
    """The household image, built FROM the local base (made when missing); cached by Docker."""
    if not _image_exists(BASE_IMAGE):
        _run_script(str(REPO / "image" / "make-base.sh"), timeout=600)
    docker("build", "-q", "-f", str(CONTAINERFILE), "--build-arg", f"BASE={BASE_IMAGE}",
           "-t", HOUSEHOLD_IMAGE, str(CONTAINERFILE.parent), timeout=600)
    return HOUSEHOLD_IMAGE


def appliance_image() -> str:
    if not _image_exists(APPLIANCE_IMAGE):
        _run_script(str(REPO / "image" / "build.sh"), timeout=900)
    return APPLIANCE_IMAGE


def systemd_quote(word: str) -> str:
    """One word of an `ExecStart=` line (systemd expands `%` specifiers and `$` variables)."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


class Household:
    """The household container; use as a context manager."""

    def __init__(self, root: Path, claude_binary: Path) -> None:
        self.root = root
        self.claude_binary = claude_binary
        self.name = f"kael-{MARK}-household-{uuid.uuid4().hex[:10]}"
        self.bus_dir = root / "household-bus"
        self.boot_seconds = 0.0

    @property
    def bus_address(self) -> str:
        return f"unix:path={self.bus_dir}/system_bus_socket"

    def __enter__(self) -> Household:
        self.bus_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            docker("run", "-d", "--name", self.name, "--label", LABEL, *SYSTEMD_OPTIONS,
                   "--network", "host",
                   "-v", f"{self.bus_dir}:/run/dbus",
                   "-v", f"{self.root}:{self.root}",
                   "-v", f"{self.claude_binary}:/usr/local/bin/claude:ro",
                   "-v", f"{START_SCRIPT}:/usr/local/bin/claude-start:ro",
                   *(arg for host, inside in CODE_MOUNTS.items()
                     for arg in ("-v", f"{host}:{inside}:ro")),
                   household_image())
            self._wait_for_systemd(started + BOOT_TIMEOUT_SECONDS)
        except BaseException:
            self.remove()
            raise
        self.boot_seconds = time.monotonic() - started
        return self

    def _wait_for_systemd(self, deadline: float) -> None:
        # Until PID 1 listens, systemctl fails at once instead of waiting.
        while True:
            proc = self.exec("systemctl", "is-system-running", "--wait", check=False,
                             timeout=max(deadline - time.monotonic(), 1.0))
            if proc.stdout.strip() in ("running", "degraded"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the household's systemd did not come up: "
                                   f"{(proc.stdout + proc.stderr).strip()!r}; {self.logs()}")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        docker("rm", "-f", "-v", self.name, check=False, timeout=60)

    def logs(self) -> str:
        return docker("logs", "--tail", "30", self.name, check=False).stderr[-2000:]

    def exec(self, *argv: str, check: bool = True, timeout: float = 60.0,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return docker("exec", "-i", self.name, *argv, check=check, timeout=timeout, stdin=stdin)

    def write(self, path: str, text: str) -> None:
        self.exec("sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", path, stdin=text)

    def exec_as_user(self, *argv: str, check: bool = True,
                     timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """ARGV as the household user, with its user bus found the standard way."""
        return docker("exec", "-u", f"{USER_UID}:{USER_UID}",
                      "-e", f"XDG_RUNTIME_DIR=/run/user/{USER_UID}", self.name, *argv,
                      check=check, timeout=timeout)

    def systemctl(self, *args: str, user: bool = False,
                  check: bool = True) -> subprocess.CompletedProcess[str]:
        if user:
            return self.exec_as_user("systemctl", "--user", *args, check=check)
        return self.exec("systemctl", *args, check=check, timeout=120)

    def start_user_manager(self) -> None:
        """Lingering for the household user: its systemd and user bus run without a login."""
        self.exec("loginctl", "enable-linger", USER_NAME)
        deadline = time.monotonic() + BOOT_TIMEOUT_SECONDS
        while self.exec("test", "-S", f"/run/user/{USER_UID}/bus", check=False).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("the household user's bus did not appear")
            time.sleep(0.1)

    def journal(self, unit: str, user: bool = False) -> str:
        if user:
            return self.exec_as_user("journalctl", "--user", "-u", unit, "--no-pager", "-n", "30",
                                     check=False).stdout
        return self.exec("journalctl", "-u", unit, "--no-pager", "-n", "30", check=False).stdout

    def install_unit(self, unit: str, text: str, dropin: str | None = None,
                     user: bool = False) -> None:
        if MARK not in unit:
            raise ValueError(f"refusing to install unit {unit!r}")
        directory = "/etc/systemd/user" if user else "/etc/systemd/system"
        self.write(f"{directory}/{unit}", text)
        if dropin is not None:
            self.write(f"{directory}/{unit}.d/drill.conf", dropin)
        self.systemctl("daemon-reload", user=user)

    def install_claude_unit(self, unit: str, *, workdir: Path, pointer: Path,
                            environment: Mapping[str, str], flags: Sequence[str],
                            user: bool = False, input_fifo: Path | None = None) -> None:
        """The example unit, verbatim, with a drop-in for the drill's paths: Claude runs as root
        (or, with USER, as a user unit of the household user) in WORKDIR, with ENVIRONMENT,
        reading POINTER, with the household FLAGS.

        With INPUT_FIFO, the unit's terminal gets its keys from that FIFO: a socket unit of the
        same name holds it open (`ListenFIFO=`) and hands it to the service as standard input,
        which the start script's script(1) passes to Claude Code's pseudo-terminal. The FIFO
        outlives every restart of the service, so whatever runs in the unit hears it."""
        env_lines = "".join(f"Environment={systemd_quote(f'{key}={value}')}\n"
                            for key, value in environment.items())
        words = " ".join(systemd_quote(word) for word in ["--", *flags])
        start = f"/usr/local/bin/claude-start {systemd_quote(str(pointer))} {words}"
        dropin = ("[Service]\nUser=\nGroup=\n"
                  f"WorkingDirectory={workdir}\n{env_lines}ExecStart=\nExecStart={start}\n")
        socket = unit.removesuffix(".service") + ".socket"
        if input_fifo is not None:
            dropin += f"Sockets={socket}\nStandardInput=socket\n"
        self.install_unit(unit, EXAMPLE_UNIT.read_text(), dropin, user=user)
        if input_fifo is not None:  # the service first: a socket without its service fails
            self.install_unit(socket, f"[Socket]\nListenFIFO={input_fifo}\nSocketMode=0600\n"
                                      "RemoveOnStop=yes\n", user=user)
            self.systemctl("start", socket, user=user)
