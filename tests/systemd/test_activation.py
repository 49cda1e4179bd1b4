"""What the switch will do to a system unit, asked before anything is touched: doctor's
`activation` check and the worker's prepare step, run as the household's unprivileged user
inside the household (the real CLI from this checkout), against a unit with `User=` of that user
and the polkit rule of examples/systemd/README.md, present or removed.

systemd is asked the way the switch asks it (RestartUnit) in a job mode it refuses only after
checking the caller's authorisation; the unit's invocation never changes during these tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations.model import Operation
from tests.builder import SESSION
from tests.guard import MARK
from tests.operations.harness import write_source
from tests.support.claude_env import claude_available, find_claude_binary
from tests.switching.sandbox import safe_config, wait_until

from .household import (
    DRILL_SITE,
    DRILL_SRC,
    EXAMPLES,
    USER_NAME,
    USER_UID,
    Household,
    docker,
    docker_reachable,
)

pytestmark = [
    pytest.mark.skipif(not docker_reachable(), reason="no Docker engine is reachable"),
    pytest.mark.skipif(not claude_available(), reason="the household mounts the Claude Code "
                       "binary, which is not installed"),
]

RULES_DIR = "/etc/polkit-1/rules.d"


def readme_rule(unit: str, user: str) -> str:
    """The polkit rule examples/systemd/README.md gives a household, for UNIT and USER."""
    readme = (EXAMPLES / "README.md").read_text()
    block = re.search(r"```js\n(.*?)```", readme, re.DOTALL)
    assert block is not None, "examples/systemd/README.md lost its polkit rule"
    rule = "\n".join(line.removeprefix("  ") for line in block.group(1).splitlines()[1:])
    assert '"claude.service"' in rule and 'subject.user == "claude"' in rule
    return rule.replace('"claude.service"', json.dumps(unit)).replace(
        'subject.user == "claude"', f"subject.user == {json.dumps(user)}") + "\n"


@pytest.fixture(scope="module")
def household(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Household]:
    root = tmp_path_factory.mktemp("systemd-activation")
    with Household(root, Path(os.path.realpath(find_claude_binary()))) as house:
        house.root.chmod(0o755)  # the user reaches its own dirs inside
        yield house


@dataclass
class Site:
    household: Household
    root: Path
    unit: str
    config: Config
    config_file: Path

    @property
    def rule_file(self) -> str:
        return f"{RULES_DIR}/50-{self.unit}.rules"

    def allow(self) -> None:
        self.household.write(self.rule_file, readme_rule(self.unit, USER_NAME))

    def disallow(self) -> None:
        self.household.exec("rm", "-f", self.rule_file)

    def invocation(self) -> str:
        return self.household.systemctl("show", "-P", "InvocationID", self.unit).stdout.strip()

    def argv(self, *args: str) -> list[str]:
        """The real CLI of this checkout with ARGS (run as the household's user, inside)."""
        return ["env", f"PYTHONPATH={DRILL_SRC}:{DRILL_SITE}", "python3", "-m",
                "kael_thread_rebuild.interfaces.cli", "--config", str(self.config_file), *args]

    def cli(self, *args: str, stdin: str | None = None) -> tuple[int, str]:
        proc = docker("exec", "-i", "-u", f"{USER_UID}:{USER_UID}", self.household.name,
                      *self.argv(*args), check=False, stdin=stdin)
        return proc.returncode, proc.stdout + proc.stderr

    @contextlib.contextmanager
    def daemon(self) -> Iterator[None]:
        """`serve` as the household's user, stopped (by its pid) on the way out."""
        pid_file = self.root / "serve.pid"
        docker("exec", "-d", "-u", f"{USER_UID}:{USER_UID}", self.household.name, "sh", "-c",
               'echo $$ > "$0" && exec "$@"', str(pid_file), *self.argv("serve"))
        try:
            wait_until(lambda: (self.config.layout.worker_log.is_file()
                                and "daemon ready" in self.config.layout.worker_log.read_text()),
                       timeout=30, what="the daemon to serve")
            yield
        finally:
            if pid_file.is_file():
                self.household.exec("kill", pid_file.read_text().strip(), check=False)

    def activation_check(self) -> dict[str, Any]:
        _, out = self.cli("doctor", "--json")
        checks = {check["name"]: check for check in json.loads(out)["checks"]}
        return dict(checks["activation"])

    def doctor_line(self) -> str:
        _, out = self.cli("doctor")
        return next(line for line in out.splitlines() if line.split()[1:2] == ["activation"])

    def give_to_user(self) -> None:
        for path in [self.root, *self.root.rglob("*")]:
            os.chown(path, USER_UID, USER_UID, follow_symlinks=False)


def _toml(config: Config) -> str:
    data = config.model_dump(mode="json", exclude_none=True)
    return "".join(f"{key} = {json.dumps(value)}\n" for key, value in data.items())


@pytest.fixture
def site(household: Household) -> Iterator[Site]:
    root = household.root / f"site-{uuid.uuid4().hex[:8]}"
    root.mkdir(mode=0o755)
    unit = f"kael-claude-{MARK}-{root.name}.service"
    household.install_unit(unit, f"[Service]\nUser={USER_NAME}\nExecStart=/bin/sleep infinity\n")
    household.systemctl("start", unit)
    pointer = root / "pointer-dir" / "pointer"
    pointer.parent.mkdir()
    pointer.write_text(f"{SESSION}\n")
    config = safe_config(root, activation="systemd", systemd_unit=unit,
                         resume_pointer_path=pointer, stability_interval_seconds=0.1,
                         stop_settle_timeout_seconds=1.0)
    for directory in (config.project_dir, config.claude_workdir, config.claude_config_dir):
        assert directory is not None
        directory.mkdir()
    config_file = root / "config.toml"
    config_file.write_text(_toml(config))
    site = Site(household, root, unit, config, config_file)
    site.give_to_user()
    try:
        yield site
    finally:
        site.disallow()
        household.systemctl("stop", unit, check=False)


def test_doctor_asks_whether_this_uid_may_restart_the_unit(site: Site) -> None:
    before = site.invocation()
    check = site.activation_check()
    assert not check["ok"], check
    assert check["detail"].startswith(f"access denied on the system bus "
                                      f"(unix:path=/run/dbus/system_bus_socket) to restart "
                                      f"{site.unit}"), check
    assert "the polkit rule of examples/systemd/README.md" in check["fix"]
    line = site.doctor_line()
    print(f"doctor, rule removed: {line}")
    assert "\n" not in line and "polkit rule" in line

    site.allow()  # polkitd reads its rules dir again on a change
    check = wait_until(lambda: (c := site.activation_check())["ok"] and c, timeout=20,
                       what="doctor to see the polkit rule")
    print(f"doctor, rule present: {site.doctor_line()}")
    assert check["detail"] == (f"this uid may restart {site.unit} (systemd asked without "
                               f"restarting it) and can replace the pointer "
                               f"{site.config.resume_pointer_path}")
    assert site.invocation() == before  # asking restarted nothing


def test_doctor_refuses_a_pointer_it_cannot_replace(site: Site) -> None:
    site.allow()
    pointer = site.config.resume_pointer_path
    assert pointer is not None
    wait_until(lambda: site.activation_check()["ok"], timeout=20, what="the rule to count")
    real = pointer.with_name("real-pointer")
    pointer.rename(real)
    pointer.symlink_to(real)
    check = site.activation_check()
    assert not check["ok"] and check["detail"] == (f"pointer file {pointer} is a symlink; "
                                                   "configure the real file's path"), check
    pointer.unlink()
    real.rename(pointer)
    pointer.parent.chmod(0o755)
    os.chown(pointer.parent, 0, 0)
    check = site.activation_check()
    assert not check["ok"] and check["detail"] == (
        f"the pointer's directory {pointer.parent} is not writable by uid {USER_UID}: a switch "
        "replaces the pointer file by a rename there"), check
    assert "a regular file" in check["fix"]


def test_the_worker_refuses_before_touching_anything(site: Site) -> None:
    source = write_source(site.config)
    site.give_to_user()
    before = site.invocation()
    files = sorted(p.name for p in site.config.project_dir.iterdir())
    stop = {"session_id": SESSION, "transcript_path": str(source), "cwd": "/home/user/project",
            "hook_event_name": "Stop", "stop_hook_active": False}

    with site.daemon():
        code, out = site.cli("request", "--reason", "activation drill", "--confirm", "REBUILD",
                             "--json")
        assert code == 0, out
        operation_id = json.loads(out)["operation"]["operation_id"]
        code, out = site.cli("hook-stop", stdin=json.dumps(stop))
        assert code == 0, out
        code, out = site.cli("wait", "--operation", operation_id, "--timeout", "60", "--json")
    record = Operation.model_validate(json.loads(out)["operation"])
    print(f"the worker, rule removed: {record.status.value}: {record.error}")
    assert record.status.value == "failed"
    assert record.error.startswith("the switch could not act on the target: access denied on "
                                   f"the system bus (unix:path=/run/dbus/system_bus_socket) to "
                                   f"restart {site.unit}"), record.error
    # Nothing was touched: no backup, no candidate, the pointer and the unit as they were.
    assert record.backup_path is None and record.new_session_id is None
    assert not list(site.config.layout.backups.glob("*/*"))
    assert sorted(p.name for p in site.config.project_dir.iterdir()) == files
    assert source.is_file()
    assert site.config.resume_pointer_path is not None
    assert site.config.resume_pointer_path.read_text() == f"{SESSION}\n"
    assert site.invocation() == before
