"""`kael-advisor doctor --host-facts JSON`: a Claude user's advisor as the installer left it on
its household, checked read-only in a one-off container of the advisor's image (roles/kael_doctor,
advisor.yml): the user's files mounted read-only at their own paths, the host's pids, and what
only root sees on the host (the image, what sudo allows) handed in as JSON. Nothing is changed
and the provider's key is never shown."""

from __future__ import annotations

import itertools
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.doctor.host_facts import HostImage
from kael_thread_rebuild.doctor.mcp import global_state_files
from kael_thread_rebuild.doctor.mcp_live import McpCommand
from kael_thread_rebuild.doctor.reading import json_dict, json_list, read_cmdline, read_json

from . import doctor
from .doctor import Check
from .pieces import SERVER_NAME
from .places import SESSIONS_FOLDER

#: The image's label naming the Kimi Code CLI it was built with (.ci/versions.env).
KIMI_LABEL = "io.kael-thread-rebuild.kimi-code-version"
#: The read-only agent the installer puts in the Kimi home.
AGENT_PATH = Path("agents") / "kael-advisor.md"


class AdvisorHost(BaseModel):
    """One Claude user's advisor on its host, as the installer's doctor gathers it as root."""

    model_config = ConfigDict(extra="forbid")

    user: str
    uid: int
    home: Path
    claude_config_dir: Path
    kimi_home: Path
    wrapper: str  # kael_wrapper_path
    config_dir: Path  # kael_config_dir: USER.advisor.argv and USER.advisor.roots
    hook_path: Path  # the hook's zipapp, kael_advisor_hook_path
    image: HostImage | None = None  # None: not loaded
    sudo_allows: bool = False  # `sudo -l -U USER WRAPPER advisor USER` answered yes

    @property
    def argv_file(self) -> Path:
        return self.config_dir / f"{self.user}.advisor.argv"

    @property
    def roots_file(self) -> Path:
        return self.config_dir / f"{self.user}.advisor.roots"

    @property
    def mcp(self) -> McpCommand:
        """The command `advisor-mcp` runs: the wrapper's advisor line through sudo."""
        return McpCommand(command="sudo", args=["-n", self.wrapper, "advisor", self.user])


def image(host: AdvisorHost) -> Check:
    found = host.image
    if found is None or not found.id:
        return Check("image", "fail", "the advisor's image is not loaded in the host's Docker "
                     "(run playbooks/install.yml)")
    labels = found.labels or {}
    if labels.get("io.kael-thread-rebuild.role") != "advisor":
        return Check("image", "fail", f"{found.ref} ({found.id[:19]}) is not the advisor's "
                     "image (no role label advisor)")
    return Check("image", "ok", f"{found.ref} ({found.id[:19]}), Kimi Code "
                 f"{labels.get(KIMI_LABEL, '?')}")


def _root_only(path: Path) -> str:
    """Why PATH is no root-owned file others may not write ("" when it is one)."""
    try:
        facts = path.lstat()
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror}"
    if not stat.S_ISREG(facts.st_mode):
        return f"{path} is not a file"
    if facts.st_uid != 0:
        return f"{path} belongs to uid {facts.st_uid}, not to root"
    if facts.st_mode & 0o022:
        return f"{path} may be written by others than root ({stat.filemode(facts.st_mode)})"
    return ""


def _argv_problem(host: AdvisorHost) -> str:
    words = host.argv_file.read_text().splitlines()
    if words[:4] != ["docker", "run", "-i", "--rm"]:
        return f"{host.argv_file} does not start with 'docker run -i --rm'"
    users = [after for word, after in itertools.pairwise(words) if word == "--user"]
    if [user.partition(":")[0] for user in users] != [str(host.uid)]:
        return f"{host.argv_file} runs as {users or 'no --user'}, not as uid {host.uid}"
    if host.image is not None and host.image.ref and words[-1] != host.image.ref:
        return f"{host.argv_file} runs {words[-1]!r}, not the image {host.image.ref!r}"
    return ""


def wrapper_rule(host: AdvisorHost) -> Check:
    """sudo allows the user the wrapper's advisor line; its argv and roots are root's."""
    line = f"{host.wrapper} advisor {host.user}"
    if not host.sudo_allows:
        return Check("wrapper", "fail", f"sudo does not allow {host.user} '{line}'")
    for path in (host.argv_file, host.roots_file):
        problem = _root_only(path)
        if problem:
            return Check("wrapper", "fail", problem)
    problem = _argv_problem(host)
    if problem:
        return Check("wrapper", "fail", problem)
    roots = [line for line in host.roots_file.read_text().splitlines() if line.strip()]
    return Check("wrapper", "ok", f"sudo allows '{line}'; {host.argv_file.name} and "
                 f"{host.roots_file.name} root's (roots: {', '.join(roots) or 'none'})")


def _registered(host: AdvisorHost) -> tuple[Path, Any] | None:
    for path in global_state_files(host.claude_config_dir, host.home):
        data, _ = read_json(path)
        servers = json_dict(data, "mcpServers")
        if SERVER_NAME in servers:
            return path, servers[SERVER_NAME]
    return None


def mcp_registered(host: AdvisorHost) -> Check:
    found = _registered(host)
    wanted = " ".join([host.mcp.command, *host.mcp.args])
    if found is None:
        return Check("mcp", "fail", f"no {SERVER_NAME!r} at user scope for {host.user} "
                     f"(claude mcp add -s user {SERVER_NAME} -- {wanted})")
    path, entry = found
    if McpCommand.of(entry) != host.mcp:
        return Check("mcp", "fail", f"{SERVER_NAME!r} in {path} does not run '{wanted}'")
    return Check("mcp", "ok", f"{SERVER_NAME!r} at user scope ({path}): {wanted}")


def _live_claude_pids(config_dir: Path) -> list[int]:
    return [entry.pid for entry in registry.read_entries(config_dir)
            if (started := registry.proc_start(entry.pid)) is not None
            and entry.proc_start in (None, started)]


def mcp_loaded(host: AdvisorHost) -> Check:
    """A running Claude Code of the user runs `advisor-mcp`; a warning otherwise (it loads MCP
    servers when it starts, so one started before the install needs a restart)."""
    live = _live_claude_pids(host.claude_config_dir)
    if not live:
        return Check("loaded", "warn", f"no Claude Code of {host.user} runs now "
                     f"({host.claude_config_dir / 'sessions'}): the next one loads {SERVER_NAME}")
    for pid in live:
        for child in registry.process_tree(pid)[1:]:
            argv = read_cmdline(child)
            if argv is not None and host.mcp.runs_as(argv):
                return Check("loaded", "ok", f"Claude Code (pid {pid}) runs {SERVER_NAME!r} as "
                             f"pid {child}")
    return Check("loaded", "warn", f"Claude Code (pid {', '.join(map(str, live))}) does not run "
                 f"{SERVER_NAME!r}: it started before the install; restart it with --continue")


def _prompt_hook_commands(settings: Any) -> Iterator[str]:
    for group in json_list(json_dict(settings, "hooks"), "UserPromptSubmit"):
        for entry in json_list(group, "hooks"):
            if isinstance(entry, dict) and isinstance(entry.get("command"), str):
                yield entry["command"]


def hook(host: AdvisorHost) -> Check:
    """The prompt hook runs the installed zipapp, and its directory was written lately."""
    settings_file = host.claude_config_dir / "settings.json"
    settings, problem = read_json(settings_file)
    if problem:
        return Check("hook", "fail", problem)
    ours = [command for command in _prompt_hook_commands(settings)
            if str(host.hook_path) in command.split()]
    if not ours:
        return Check("hook", "fail", f"no UserPromptSubmit hook of {settings_file} runs "
                     f"{host.hook_path}")
    problem = _root_only(host.hook_path)
    if problem:
        return Check("hook", "fail", problem)
    written = doctor.hook_written(host.claude_config_dir / SESSIONS_FOLDER)
    return Check("hook", written.status, f"{ours[0]!r} in {settings_file}; {written.detail}")


def agent(host: AdvisorHost) -> Check:
    return doctor.agent(host.kimi_home / AGENT_PATH)


def provider(host: AdvisorHost) -> Check:
    """A model, its provider's base URL and key in the user's Kimi config (never shown)."""
    found = doctor.provider(host.kimi_home / "config.toml")
    if found.status == "ok" and "default URL" in found.detail:
        return Check("provider", "fail", f"{found.detail}: no base_url")
    return found if found.status != "warn" else Check("provider", "fail", found.detail)


def kimi(host: AdvisorHost) -> Check:
    """The image's Kimi Code CLI runs, at the version the image was built with."""
    pinned = (host.image.labels or {}).get(KIMI_LABEL, "") if host.image else ""
    ran = doctor.kimi_version()
    if ran.status != "ok" or not pinned:
        return ran if ran.status != "ok" else Check("kimi", "fail", f"{ran.detail}; the image "
                                                    f"names no pinned version ({KIMI_LABEL})")
    said = ran.detail.rsplit(" ", 1)[-1]
    if said != pinned:
        return Check("kimi", "fail", f"{ran.detail}, not the pinned {pinned}")
    return Check("kimi", "ok", f"{ran.detail} (pinned {pinned})")


CHECKS: tuple[Callable[[AdvisorHost], Check], ...] = (
    image, wrapper_rule, mcp_registered, mcp_loaded, hook, agent, provider, kimi)


def checks(host: AdvisorHost) -> list[Check]:
    return [check(host) for check in CHECKS]
