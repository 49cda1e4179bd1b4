"""`kael-advisor doctor --host-facts`: a Claude user's advisor as the installer leaves it, checked
through the CLI on a household made of real pieces (the real Claude Code registers
`advisor-mcp` at user scope, the real prompt hook writes its directory, mcp-command.sh writes the
argv, the pinned Kimi Code CLI answers its version, a live process of the user runs the
registered command). A good household passes every check; each breakage fails its own check,
and the provider's key is never printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kael_advisor.host_doctor import KIMI_LABEL
from kael_advisor.pieces import SERVER_NAME
from kael_advisor.runner import agent_file
from kael_thread_rebuild.claude_code import registry
from tests.support.claude_env import find_claude_binary
from tests.support.kimi_env import STANDIN_KEY, find_kimi_binary, kimi_config_toml
from tests.switching.sandbox import wait_until

REPO = Path(__file__).resolve().parents[2]
MCP_COMMAND = REPO / "image" / "advisor" / "mcp-command.sh"
USER = "alice-DO-NOT-CREATE"
WRAPPER = "/usr/local/lib/kael-thread-rebuild/kael-run"
IMAGE = "kael-advisor:test-DO-NOT-CREATE"
PINNED = "2.1.0"
ORDER = ["image", "wrapper", "mcp", "loaded", "hook", "agent", "provider", "kimi"]


@dataclass
class House:
    root: Path
    facts: dict[str, Any]

    @property
    def home(self) -> Path:
        return Path(self.facts["home"])

    @property
    def claude(self) -> Path:
        return Path(self.facts["claude_config_dir"])

    @property
    def kimi_home(self) -> Path:
        return Path(self.facts["kimi_home"])

    @property
    def argv(self) -> Path:
        return Path(self.facts["config_dir"]) / f"{USER}.advisor.argv"

    def doctor(self, **changed: Any) -> dict[str, dict[str, str]]:
        """The CLI's checks by name (its JSON), with CHANGED facts."""
        facts = {**self.facts, **changed}
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home),
               "KAEL_ADVISOR_KIMI": str(find_kimi_binary()),
               "KIMI_CODE_HOME": str(self.kimi_home)}
        done = subprocess.run([sys.executable, "-m", "kael_advisor.cli", "doctor", "--json",
                               "--host-facts", json.dumps(facts)], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert STANDIN_KEY not in done.stdout + done.stderr
        found = {check["name"]: check for check in json.loads(done.stdout)}
        assert list(found) == ORDER, done
        assert done.returncode == (1 if any(c["status"] == "fail" for c in found.values())
                                   else 0), done
        return found


def _registered(home: Path) -> None:
    """advisor-mcp registered at user scope by the real Claude Code, as the installer does."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    subprocess.run([str(find_claude_binary()), "mcp", "add", "-s", "user", SERVER_NAME, "--",
                    "sudo", "-n", WRAPPER, "advisor", USER], env=env, cwd=home,
                   capture_output=True, check=True, timeout=120)


@pytest.fixture
def house(tmp_path: Path) -> House:
    home, config_dir, libexec = tmp_path / "home", tmp_path / "etc", tmp_path / "libexec"
    claude, kimi_home = home / ".claude", home / ".kimi-code"
    sessions = claude / "kael-advisor-sessions"
    for folder in (claude, kimi_home / "agents", config_dir, libexec):
        folder.mkdir(parents=True)
    sessions.mkdir(mode=0o700)
    hook_path = libexec / "kael-advisor-hook.pyz"
    shutil.copyfile(REPO / "src" / "kael_advisor" / "hook.py", hook_path)  # a stand-in file
    hook_path.chmod(0o755)
    (claude / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "my-own-hook"}]},
        {"hooks": [{"type": "command", "command": f"python3 -I {hook_path}"}]}]}}))
    _registered(home)
    # The real hook writes its directory, as at a prompt.
    subprocess.run([sys.executable, "-m", "kael_advisor.hook"], check=True, timeout=30,
                   input=json.dumps({"session_id": "0d5e1f2a-1111-4222-8333-444455556666",
                                     "cwd": str(home)}), text=True,
                   env={**os.environ, "KAEL_ADVISOR_SESSIONS": str(sessions)})
    shutil.copyfile(agent_file(), kimi_home / "agents" / "kael-advisor.md")
    (kimi_home / "config.toml").write_text(kimi_config_toml("http://127.0.0.1:9/v1"))
    uid = os.getuid()
    argv = subprocess.run([str(MCP_COMMAND), "--no-project", "--user", f"{uid}:{os.getgid()}",
                           "--sessions", str(sessions), "--kimi-home", str(kimi_home),
                           "--image", IMAGE], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    (config_dir / f"{USER}.advisor.argv").write_text(argv)
    (config_dir / f"{USER}.advisor.roots").write_text(f"{home}\n")
    facts = {"user": USER, "uid": uid, "home": str(home), "claude_config_dir": str(claude),
             "kimi_home": str(kimi_home), "wrapper": WRAPPER, "config_dir": str(config_dir),
             "hook_path": str(hook_path), "sudo_allows": True,
             "image": {"ref": IMAGE, "id": "sha256:" + "ab" * 32,
                       "labels": {"io.kael-thread-rebuild.role": "advisor", KIMI_LABEL: PINNED}}}
    return House(tmp_path, facts)


@pytest.fixture
def running(house: House) -> Iterator[subprocess.Popen[bytes]]:
    """A live Claude Code of the user (in its session registry) whose child runs the
    registered command line."""
    claude = subprocess.Popen(
        ["bash", "-c", 'bash -c "sleep 300; :" sudo -n "$1" advisor "$2"; :', "claude",
         WRAPPER, USER])
    try:
        wait_until(lambda: len(registry.process_tree(claude.pid)) > 1, 30,
                   what="the MCP server's stand-in")
        (house.claude / "sessions").mkdir()
        (house.claude / "sessions" / f"{claude.pid}.json").write_text(json.dumps(
            {"pid": claude.pid, "sessionId": "s", "procStart": registry.proc_start(claude.pid)}))
        yield claude
    finally:
        for pid in reversed(registry.process_tree(claude.pid)):
            os.kill(pid, 9)
        claude.wait(timeout=30)


def _statuses(found: dict[str, dict[str, str]]) -> dict[str, str]:
    return {name: check["status"] for name, check in found.items()}


@pytest.mark.skipif(os.geteuid() != 0, reason="root-owned files need root")
def test_a_good_household_passes_every_check(house: House,
                                             running: subprocess.Popen[bytes]) -> None:
    found = house.doctor()
    assert _statuses(found) == dict.fromkeys(ORDER, "ok"), found
    assert found["loaded"]["detail"].startswith(f"Claude Code (pid {running.pid}) runs "), found
    assert found["kimi"]["detail"].endswith(f"{PINNED} (pinned {PINNED})"), found
    assert "key set" in found["provider"]["detail"]


@pytest.mark.skipif(os.geteuid() != 0, reason="root-owned files need root")
def test_each_breakage_fails_its_own_check(house: House) -> None:
    def only(name: str, status: str = "fail", also: str = "", **changed: Any) -> str:
        found = house.doctor(**changed)
        wanted = {**dict.fromkeys(ORDER, "ok"), "loaded": "warn", name: status}
        wanted.update({also: "fail"} if also else {})
        assert _statuses(found) == wanted, found
        return found[name]["detail"]

    # No Claude Code runs: a warning only.
    assert "no Claude Code of" in only("loaded", "warn")
    # Without the image there is no pinned version to compare the CLI with either.
    assert "not loaded" in only("image", also="kimi", image=None)
    assert "2.1.0, not the pinned 9.9.9" in only("kimi", image={
        **house.facts["image"], "labels": {"io.kael-thread-rebuild.role": "advisor",
                                           KIMI_LABEL: "9.9.9"}})
    assert "sudo does not allow" in only("wrapper", sudo_allows=False)
    os.chown(house.argv, 4242, 4242)
    assert "not to root" in only("wrapper")
    os.chown(house.argv, 0, 0)
    house.argv.chmod(0o666)
    assert "may be written by others" in only("wrapper")
    house.argv.chmod(0o644)
    assert f"not as uid {house.facts['uid'] + 1}" in only("wrapper", uid=house.facts["uid"] + 1)
    state = house.home / ".claude.json"
    saved = state.read_text()
    state.write_text(json.dumps({"mcpServers": {SERVER_NAME: {
        "type": "stdio", "command": "sudo", "args": ["-n", WRAPPER, "mcp", USER]}}}))
    assert "does not run" in only("mcp")
    state.unlink()
    assert f"no {SERVER_NAME!r} at user scope" in only("mcp")
    state.write_text(saved)
    settings = house.claude / "settings.json"
    saved = settings.read_text()
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "my-own-hook"}]}]}}))
    assert "no UserPromptSubmit hook" in only("hook")
    settings.write_text(saved)
    sessions = house.claude / "kael-advisor-sessions"
    sessions.rename(sessions.with_name("away"))
    assert "has never run" in only("hook")
    sessions.with_name("away").rename(sessions)
    agent = house.kimi_home / "agents" / "kael-advisor.md"
    agent.write_text(agent.read_text().replace("tools: Read, Glob, Grep",
                                               "tools: Read, Glob, Grep, Bash"))
    assert "no read-only frontmatter" in only("agent")
    agent.unlink()
    assert "cannot be read" in only("agent")
    shutil.copyfile(agent_file(), agent)
    config = house.kimi_home / "config.toml"
    config.write_text(config.read_text().replace(f'api_key = "{STANDIN_KEY}"', ""))
    assert "key not set" in only("provider")
    config.unlink()
    assert "no provider configured" in only("provider")
    old = sessions.stat().st_mtime - 3 * 86400
    for window in sessions.glob("*.json"):
        os.utime(window, (old, old))
    assert "last written" in only("hook", "warn", also="provider")
