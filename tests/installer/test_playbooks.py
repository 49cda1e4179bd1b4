"""The playbooks: syntax, check mode, and a converge against a stand-in household on this machine
that re-runs with 0 changed, repairs a dropped `hooks` key, and uninstalls back to the original.

The household: a fake `claude` in a private tmux server (`-L kael-test-…-DO-NOT-CREATE`), its own
CLAUDE_CONFIG_DIR in the temp dir, the real Claude Code binary for `claude mcp`. Without the
appliance (`kael_appliance_enabled: false`) the engine of this venv stands in for the container:
hook, MCP command and doctor run on the host. With Docker and the image present, a second test
runs the appliance itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kael_thread_rebuild import __version__
from kael_thread_rebuild.config import load_config
from tests.installer.conftest import (
    FOREIGN_SETTINGS,
    INCIDENT_FLAGS,
    REAL_CLAUDE,
    REPO,
    VENV_BIN,
    Household,
    ansible_env,
)

PLAYBOOKS = ["install.yml", "doctor.yml", "uninstall.yml"]
INCIDENT_START = "claude --continue " + " ".join(INCIDENT_FLAGS)
OURS = [f"mcp__kael-thread-rebuild__thread_rebuild_{t}" for t in ("doctor", "dirty", "plan",
                                                                     "status")]
IMAGE = "kael-thread-rebuild:latest"


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.proc, self.out = proc, proc.stdout + proc.stderr
        recap = re.search(r"localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+"
                          r"failed=(\d+)", proc.stdout)
        assert recap, self.out[-3000:]
        self.ok, self.changed, self.failed = (int(g) for g in recap.groups())
        # "TASK [role : name] ***" followed by "changed: …": which tasks changed, for messages.
        self.changed_tasks = re.findall(
            r"TASK \[([^\]]+)\][^\n]*\n(?:(?!TASK \[)[^\n]*\n)*?changed:", proc.stdout)


def playbook(tmp_path: Path, inventory: Path, name: str, *options: str) -> Run:
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), f"playbooks/{name}",
         *options], cwd=REPO, env=ansible_env(tmp_path), text=True, capture_output=True,
        timeout=600, check=False)
    return Run(proc)


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_syntax(tmp_path: Path, name: str) -> None:
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "inventory/example.yml",
                           "--syntax-check", f"playbooks/{name}"], cwd=REPO,
                          env=ansible_env(tmp_path), text=True, capture_output=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def inventory(tmp_path: Path, place: Household, instance: str, **host: Any) -> Path:
    config = tmp_path / "etc" / f"{instance}.toml"
    host_vars: dict[str, Any] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(VENV_BIN / "python"),
        "kael_config_dir": str(tmp_path / "etc"),
        "kael_state_root": str(tmp_path / "state"),
        "kael_hook_path": str(tmp_path / "bin" / "kael-hook"),
        "kael_libexec_dir": str(tmp_path / "libexec"),
        "kael_container_prefix": "kael-test-",
        "kael_instances": [{"name": instance, "tmux_socket": place.socket,
                            "claude_config_dir": str(place.config_dir)}],
        **host,
    }
    if not host_vars.get("kael_appliance_enabled", True):
        host_vars["kael_instances"][0].update({
            "hook_command": f"{VENV_BIN}/kael-thread-rebuild --config {config} hook-stop",
            "mcp_command": [f"{VENV_BIN}/kael-thread-rebuild-mcp", "--config", str(config)]})
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"households": {"hosts": {"localhost": host_vars}}}))
    return path


def settings_of(place: Household) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((place.config_dir / "settings.json").read_text())
    return data


def mcp_servers(place: Household) -> dict[str, Any]:
    state = place.config_dir / ".claude.json"
    servers: dict[str, Any] = json.loads(state.read_text()).get("mcpServers", {}) \
        if state.exists() else {}
    return servers


def stop_commands(data: dict[str, Any]) -> list[str]:
    return [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]


def needs_real_claude() -> None:
    if not REAL_CLAUDE.exists():
        pytest.skip(f"the pinned Claude Code is not installed at {REAL_CLAUDE} (.ci/setup)")


def test_converge_rerun_repair_and_uninstall(tmp_path: Path, household: Household) -> None:
    needs_real_claude()
    household.start_claude(INCIDENT_START)
    name = f"kael-test-{uuid.uuid4().hex[:6]}"
    engine = str(VENV_BIN / "kael-thread-rebuild")
    inv = inventory(tmp_path, household, name, kael_appliance_enabled=False,
                    kael_doctor_on_host=True, kael_engine_command=[engine])
    settings_file = household.config_dir / "settings.json"
    original = settings_file.read_bytes()

    checked = playbook(tmp_path, inv, "install.yml", "--check", "--diff")
    assert checked.failed == 0 and checked.changed > 0, checked.out[-3000:]
    assert settings_file.read_bytes() == original
    assert not (tmp_path / "etc" / f"{name}.toml").exists() and not mcp_servers(household)

    first = playbook(tmp_path, inv, "install.yml")
    assert first.failed == 0, first.out[-4000:]
    assert '"resume_command: [\\"claude\\", \\"--resume\\", \\"{session_id}\\", ' \
           '\\"--channels\\"' in first.out  # shown in the play output
    assert f"{name}: doctor green" in first.out
    config = load_config(tmp_path / "etc" / f"{name}.toml")
    assert config.resume_command == ["claude", "--resume", "{session_id}", *INCIDENT_FLAGS]
    assert config.activation.value == "tmux" and config.tmux_target == "DO-NOT-CREATE-cc:0.0"
    assert config.project_dir == household.project_dir
    data = settings_of(household)
    hook = f"{engine} --config {tmp_path / 'etc' / name}.toml hook-stop"
    assert stop_commands(data) == ["notify-done", hook]
    assert data["permissions"] == {"allow": ["Bash(ls:*)", *OURS], "deny": ["Read(./.env)"]}
    assert {k: v for k, v in data.items() if k not in ("hooks", "permissions")} == \
        {k: v for k, v in FOREIGN_SETTINGS.items() if k not in ("hooks", "permissions")}
    server = mcp_servers(household)["kael-thread-rebuild"]
    assert [server["command"], *server["args"]] == [
        f"{VENV_BIN}/kael-thread-rebuild-mcp", "--config", str(tmp_path / "etc" / f"{name}.toml")]

    again = playbook(tmp_path, inv, "install.yml")
    assert (again.failed, again.changed) == (0, 0), (again.changed_tasks, again.out[-3000:])

    doctor = playbook(tmp_path, inv, "doctor.yml", "--check")
    assert (doctor.failed, doctor.changed) == (0, 0) and "doctor green" in doctor.out

    installed = settings_file.read_bytes()
    dry = playbook(tmp_path, inv, "uninstall.yml", "--check")
    assert dry.failed == 0 and dry.changed > 0 and settings_file.read_bytes() == installed

    broken = settings_of(household)
    del broken["hooks"]  # Claude Code rewrote the file without it
    settings_file.write_text(json.dumps(broken, indent=2))
    repaired = playbook(tmp_path, inv, "install.yml")
    assert (repaired.failed, repaired.changed) == (0, 1), repaired.out[-4000:]
    assert stop_commands(settings_of(household)) == [hook]

    gone = playbook(tmp_path, inv, "uninstall.yml")
    assert gone.failed == 0, gone.out[-4000:]
    assert settings_of(household) == {k: v for k, v in FOREIGN_SETTINGS.items() if k != "hooks"}
    assert "kael-thread-rebuild" not in mcp_servers(household)
    assert not (tmp_path / "etc" / f"{name}.toml").exists()
    backups = sorted((tmp_path / "state" / name / "settings-backups").iterdir())
    assert json.loads(backups[0].read_bytes()) == json.loads(original)  # state and backups kept
    assert playbook(tmp_path, inv, "uninstall.yml").changed == 0


def docker_image_present() -> bool:
    if shutil.which("docker") is None:
        return False
    proc = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True,
                          check=False, timeout=60)
    return proc.returncode == 0


def test_appliance_converges_and_reruns_unchanged(tmp_path: Path, household: Household) -> None:
    needs_real_claude()
    if not docker_image_present():
        pytest.skip(f"no Docker engine with the image {IMAGE} (.ci/docker-up builds it)")
    household.start_claude(INCIDENT_START)
    name = f"kael-test-{uuid.uuid4().hex[:6]}"
    container = f"kael-test-{name}"
    # A tag of its own: a rebuild of :latest during the test must not look like drift.
    image = f"kael-test-image:{name}"
    upgrade = f"kael-test-image:{name}-upgrade"
    subprocess.run(["docker", "tag", IMAGE, image], check=True, capture_output=True)
    inv = inventory(tmp_path, household, name, kael_image=image,
                    kael_install_python_requests=False)
    try:
        first = playbook(tmp_path, inv, "install.yml")
        inspect = json.loads(subprocess.run(["docker", "inspect", container], check=True,
                                            capture_output=True, text=True).stdout)[0]
        host = inspect["HostConfig"]
        assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"], (
            inspect["Config"]["Cmd"], host["ReadonlyRootfs"], host["CapDrop"], host["Binds"])
        assert host["NetworkMode"] == "none" and "no-new-privileges" in host["SecurityOpt"]
        assert inspect["Config"]["User"] == "0:0"
        assert f"{household.project_dir}:{household.project_dir}:rw" in host["Binds"]
        assert inspect["Config"]["Labels"]["io.kael-thread-rebuild.instance"] == name
        hook = stop_commands(settings_of(household))[-1]
        assert hook.startswith(f"{tmp_path}/bin/kael-hook --container {container} --config ")
        server = mcp_servers(household)["kael-thread-rebuild"]
        assert server["command"] == "docker" and server["args"][:3] == ["run", "-i", "--rm"]
        assert tomllib.loads((tmp_path / "etc" / f"{name}.toml").read_text())[
            "resume_command"] == ["claude", "--resume", "{session_id}", *INCIDENT_FLAGS]

        # Doctor ran in the appliance and every check passed, none skipped: the deaf-process
        # check against the live process, the Stop hook (kael-hook), the MCP registration, the
        # orphaned MCP containers and the versions from the host's Docker engine.
        assert first.failed == 0, first.out[-4000:]
        assert f"{name}: doctor green, 13 ok, skipped: none" in first.out, first.out[-4000:]
        again = playbook(tmp_path, inv, "install.yml")
        assert (again.failed, again.changed) == (0, 0), (again.changed_tasks, again.out[-4000:])
        doctor = playbook(tmp_path, inv, "doctor.yml", "--check")
        assert (doctor.failed, doctor.changed) == (0, 0), doctor.out[-4000:]
        assert f"{name}: doctor green, 13 ok, skipped: none" in doctor.out

        # A leftover MCP server container of this instance fails the host, listed like the rest.
        subprocess.run(["docker", "create", "--label", "io.kael-thread-rebuild.role=mcp",
                        "--label", f"io.kael-thread-rebuild.instance={name}", "--name",
                        f"{container}-mcp-left", image, "--version"], check=True,
                       capture_output=True)
        orphan = playbook(tmp_path, inv, "doctor.yml")
        assert orphan.failed == 1, orphan.out[-4000:]
        assert re.search(rf"{name}: doctor is not green\. mcp_containers: MCP server containers "
                         rf"of instance '{name}' left behind: 1 not running: "
                         rf"{container}-mcp-left \(Created\)", orphan.out), orphan.out[-4000:]
        subprocess.run(["docker", "rm", f"{container}-mcp-left"], check=True, capture_output=True)

        # An image of another version installed, the daemon not restarted onto it: the host fails.
        subprocess.run(["docker", "create", "--name", f"{container}-relabel", image],
                       check=True, capture_output=True)
        subprocess.run(["docker", "commit", "--change",
                        "LABEL org.opencontainers.image.version=0.0.0-upgrade",
                        f"{container}-relabel", upgrade], check=True, capture_output=True)
        mismatch = playbook(tmp_path, inv, "doctor.yml", "-e", f"kael_image={upgrade}")
        assert mismatch.failed == 1, mismatch.out[-4000:]
        assert re.search(rf"{name}: doctor is not green\. versions: the daemon {container} runs "
                         rf"version {__version__} \(\w{{12}}\) but {upgrade} is 0\.0\.0-upgrade",
                         mismatch.out), mismatch.out[-4000:]
    finally:
        gone = playbook(tmp_path, inv, "uninstall.yml")
        subprocess.run(["docker", "rm", "-f", container, f"{container}-mcp-left",
                        f"{container}-relabel"], capture_output=True, check=False)
        subprocess.run(["docker", "rmi", image, upgrade], capture_output=True, check=False)
    assert gone.failed == 0 and settings_of(household)["hooks"] == FOREIGN_SETTINGS["hooks"]
