"""The playbooks: syntax, and the install without the appliance (`kael_appliance_enabled:
false`, the engine of this venv on the host for hook, MCP command and doctor), which no Molecule
household runs: check mode, converge, 0 changed on the re-run, a dropped `hooks` repaired, and
uninstall back to the original.

The household: a fake `claude` in a private tmux server (`-L kael-test-…-DO-NOT-CREATE`), its own
CLAUDE_CONFIG_DIR in the temp dir, the real Claude Code binary for `claude mcp`. The install with
the appliance, on households built as people build them and over a real connection, is
Molecule's (molecule/: the appliance's hardening, doctor green with every check, a left MCP
container and another image version failing doctor, idempotence, repair, uninstall).
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

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
from tests.support import collection

PLAYBOOKS = ["install.yml", "doctor.yml", "uninstall.yml"]
INCIDENT_START = "claude --continue " + " ".join(INCIDENT_FLAGS)
OURS = [f"mcp__kael-thread-rebuild__thread_rebuild_{t}" for t in ("doctor", "dirty", "plan",
                                                                     "status")]


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
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), collection.playbook(name),
         *options], cwd=REPO, env=ansible_env(tmp_path), text=True, capture_output=True,
        timeout=600, check=False)
    return Run(proc)


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_syntax(tmp_path: Path, name: str) -> None:
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "inventory/example.yml",
                           "--syntax-check", collection.playbook(name)], cwd=REPO,
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
    claude = str(household.bin / "claude")  # absolute: from the live process's PATH
    assert f'"resume_command: [\\"{claude}\\", \\"--resume\\", \\"{{session_id}}\\", ' \
           '\\"--channels\\"' in first.out  # shown in the play output
    assert f"{name}: doctor green" in first.out
    # The live Claude Code started before our MCP server was registered: the play gives the
    # reload of this instance (no appliance: the engine on the host, as the Claude user).
    reload = f"{engine} --config {tmp_path}/etc/{name}.toml reload --confirm RELOAD"
    assert f"{name}: the running Claude Code has not loaded the MCP server" in first.out
    assert reload in first.out, first.out[-4000:]
    config = load_config(tmp_path / "etc" / f"{name}.toml")
    assert config.resume_command == [claude, "--resume", "{session_id}", *INCIDENT_FLAGS]
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
