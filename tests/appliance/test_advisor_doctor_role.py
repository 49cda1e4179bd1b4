"""Issue 24, item 3, through the installer: roles/kael_doctor runs the advisor's checks for each
kael_advisor entry, by Ansible as root over Docker's connection into a household whose Claude
user (`household`, uid 1000) has no Docker access. The household's advisor is wired by hand the
way the installer wires it (the wrapper's rule and root-owned argv and roots, advisor-mcp
registered at user scope by the real Claude Code as that user, the prompt hook's zipapp out of
the image in its settings, the read-only agent and a provider in its Kimi home). Green, the
play prints one line per check; with the wrapper's rule gone it fails the host and says why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kael_advisor.runner import agent_file
from tests.advisor.test_image import ADVISOR_IMAGE_ENV
from tests.support.claude_env import find_claude_binary
from tests.support.kimi_env import STANDIN_KEY, kimi_config_toml

from . import engine
from .sudo_household import LIBEXEC, PATH, UID, USER, WRAPPER, SudoHousehold, sudo_household

REPO = engine.REPO
MCP_COMMAND = REPO / "image" / "advisor" / "mcp-command.sh"
PLAY = [{"hosts": "household", "gather_facts": True, "gather_subset": ["min"],
         "roles": ["kael.appliance.kael_doctor"]}]
ORDER = ["image", "wrapper", "mcp", "loaded", "hook", "agent", "provider", "kimi"]


def _wire(tmp_path: Path, home: SudoHousehold, image: str) -> dict[str, Any]:
    """The advisor of the household's user, as the installer leaves it: the play's variables.
    Its files lie under TMP_PATH, at the same path in the household and on the host, whose
    Docker runs the doctor's container."""
    user_home = tmp_path / "home" / USER
    claude, kimi_home = user_home / ".claude", user_home / ".kimi-code"
    sessions = claude / "kael-advisor-sessions"
    etc, libexec = tmp_path / "etc", tmp_path / "libexec"  # root's, at the same path everywhere
    for folder in (sessions, kimi_home / "agents", user_home / "project"):
        folder.mkdir(parents=True)
    for folder in (etc, libexec):
        folder.mkdir(mode=0o755)
    hook = libexec / "kael-advisor-hook.pyz"
    hook.write_bytes(subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", image,
         "/opt/kael-advisor/kael-advisor-hook.pyz"], capture_output=True, check=True,
        timeout=60).stdout)
    hook.chmod(0o755)
    (claude / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": f"python3 -I {hook}"}]}]}}))
    shutil.copyfile(agent_file(), kimi_home / "agents" / "kael-advisor.md")
    (kimi_home / "config.toml").write_text(kimi_config_toml("http://127.0.0.1:9/v1"))
    for folder, dirs, files in os.walk(user_home):
        for path in [folder, *(os.path.join(folder, name) for name in dirs + files)]:
            os.chown(path, UID, UID)
    sessions.chmod(0o700)
    argv = subprocess.run([str(MCP_COMMAND), "--no-project", "--user", f"{UID}:{UID}",
                           "--sessions", str(sessions), "--kimi-home", str(kimi_home),
                           "--image", image], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    (etc / f"{USER}.advisor.argv").write_text(argv)
    (etc / f"{USER}.advisor.roots").write_text(f"{user_home}\n")
    rule = home.run("bash", "-c", f". {LIBEXEC}/lib.sh && kael_sudoers_rule {UID} {WRAPPER} "
                    f"{USER} advisor >/etc/sudoers.d/kael-advisor-{USER} "
                    f"&& chmod 0440 /etc/sudoers.d/kael-advisor-{USER}")
    assert rule.returncode == 0, rule
    # As the user: the real Claude Code registers the server, the hook runs at a prompt.
    env = {"HOME": str(user_home), "PATH": PATH, "CLAUDE_CONFIG_DIR": str(claude),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    for argv_, stdin in (
            (["claude", "mcp", "add", "-s", "user", "advisor-mcp", "--", "sudo", "-n", WRAPPER,
              "advisor", USER], b""),
            (["python3", "-I", str(hook)],
             json.dumps({"session_id": "0d5e1f2a-1111-4222-8333-444455556666",
                         "cwd": str(user_home / "project")}).encode())):
        done = home.as_claude(*argv_, stdin=stdin, env=env, workdir=user_home)
        assert done.returncode == 0, done
    assert list(sessions.glob("*.json")), "the hook wrote no window file"
    return {"kael_config_dir": str(etc), "kael_advisor_hook_path": str(hook),
            "kael_advisor_image": image, "kael_detect_found": [],
            # Its home in the household is not the host's: the places are named.
            "kael_advisor": [{"user": USER, "claude_config_dir": str(claude),
                              "kimi_home": str(kimi_home), "provider": {
                "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": STANDIN_KEY}}]}


def _lines(out: str) -> dict[str, str]:
    """The doctor's printed lines by check: `household: advisor STATUS  NAME  DETAIL`."""
    found = re.findall(rf'"{USER}: advisor (ok|warn|fail)  (\w+)  ', out)
    return {name: status for status, name in found}


def test_the_doctor_role_runs_the_advisors_checks_and_fails_without_the_rule(
        tmp_path: Path, appliance: engine.Instance) -> None:
    image = os.environ.get(ADVISOR_IMAGE_ENV) or "kael-advisor:latest"
    with sudo_household(tmp_path, appliance, find_claude_binary()) as home:
        variables = _wire(tmp_path, home, image)

        green = home.play(tmp_path, PLAY, variables)
        print(green.stdout[-4000:])
        assert green.returncode == 0, green.stdout[-6000:] + green.stderr[-2000:]
        # No Claude Code of the user runs here: a warning, no failure.
        assert _lines(green.stdout) == {**dict.fromkeys(ORDER, "ok"), "loaded": "warn"}, \
            green.stdout[-6000:]
        assert f"{USER}: the advisor's doctor is green" in green.stdout
        # The CLI in the image is the version .ci/versions.env pins.
        pinned = re.search(r"^KIMI_CODE_VERSION=(\S+)$", (REPO / ".ci" / "versions.env")
                           .read_text(), re.MULTILINE)
        assert pinned and f"kimi  /opt/kimi-code/bin/kimi {pinned[1]} (pinned {pinned[1]})" \
            in green.stdout
        assert STANDIN_KEY not in green.stdout + green.stderr

        # Check mode where the installer left no record (a fresh host): nothing is examined.
        fresh = home.play(tmp_path, PLAY, variables, "--check")
        assert fresh.returncode == 0 and _lines(fresh.stdout) == {}, fresh.stdout[-6000:]

        home.run("rm", f"/etc/sudoers.d/kael-advisor-{USER}")
        red = home.play(tmp_path, PLAY, variables)
        print(red.stdout[-3000:])
        assert red.returncode != 0
        assert _lines(red.stdout)["wrapper"] == "fail", red.stdout[-6000:]
        assert (f"{USER}: the advisor's doctor is not green: wrapper: sudo does not allow "
                f"{USER} '{WRAPPER} advisor {USER}'") in red.stdout, red.stdout[-6000:]
