"""Containers and versions, from the host's facts: no MCP server container left behind, the
daemon runs the installed image, and the Claude user reaches the appliance only through the
wrapper."""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..claude_code import registry
from ..config import Activation, Config
from .facts import Facts
from .host_facts import ClaudeAccess, HostContainer, HostDaemon, HostFacts, HostImage
from .model import Check, failed, passed, skipped

LABEL_PREFIX = "io.kael-thread-rebuild"
VERSION_LABEL = "org.opencontainers.image.version"
REVISION_LABEL = "org.opencontainers.image.revision"

_NEEDS_THE_HOST = ("not checked here: it needs the Docker engine, which no appliance container "
                   "reaches; image/run-doctor.sh and the installer's doctor (playbooks/doctor.yml) "
                   "check it on the host")
_RESTART = ("restart the daemon on the installed image: image/run-daemon.sh --config <config> "
            "--image <image>, or re-run the installer")


def _host(facts: Facts, name: str) -> HostFacts | Check:
    """The host's facts, or the check's result when there are none to judge by."""
    host = facts.host
    if host is None:
        return skipped(name, _NEEDS_THE_HOST)
    if isinstance(host, str):
        return failed(name, host, "report this; it is how the host passes what it saw")
    return host


def check_mcp_containers(facts: Facts) -> Check:
    """No MCP server container left behind: every one of the instance runs, and no more run
    than there are live Claude Code processes (each starts one)."""
    name = "mcp_containers"
    host = _host(facts, name)
    if isinstance(host, Check):
        return host
    # One that is "removing" is on its way out (--rm after its Claude Code exited).
    containers = [c for c in host.mcp_containers if c.state != "removing"]
    stopped = [c for c in containers if c.state != "running"]
    running = [c for c in containers if c.state == "running"]
    live = facts.live_claude_pids
    extra = running if len(running) > len(live) else []
    if stopped or extra:
        problems = _left_behind(stopped, extra, len(live),
                                registry.registry_dir(facts.claude_config_dir))
        names = " ".join(c.label for c in stopped + extra)
        return failed(name, f"MCP server containers of instance {facts.config.instance!r} left "
                            f"behind: {problems}",
                      f"docker rm -f the ones no live Claude Code uses (of: {names}); a Claude "
                      "Code restarted later starts its own")
    return passed(name, f"{len(running)} running for {len(live)} live Claude Code process(es), "
                        "none left behind")


def _left_behind(stopped: list[HostContainer], extra: list[HostContainer], live: int,
                 registry_dir: Path) -> str:
    """What is left behind: the STOPPED containers, and the running ones when there are more
    (EXTRA) than LIVE Claude Code processes registered in REGISTRY_DIR."""
    problems = []
    if stopped:
        problems.append(f"{len(stopped)} not running: " + ", ".join(
            f"{c.label} ({c.status or c.state})" for c in stopped))
    if extra:
        problems.append(f"{len(extra)} running for {live} live Claude Code process(es) "
                        f"in {registry_dir}: " + ", ".join(c.label for c in extra))
    return "; ".join(problems)


#: The wrapper's lines every Claude user needs: its MCP server and its Stop hook.
WRAPPER_LINES = ("mcp", "hook")
#: The pointer runner's, too (KAEL_RUN, docs/pointer-runner.md): the wait after each Stop, and
#: the report of a session it could not start. The installer allows them; allow-user.sh does not.
POINTER_WRAPPER_LINES = ("wait", "start-failed")


def _access_problems(access: ClaudeAccess, config: Config) -> list[tuple[str, str]]:
    """(problem, fix) for each way the Claude user's access is off."""
    who = f"the Claude user {access.user or '?'} (uid {access.uid})"
    problems = []
    if "docker" in access.groups:
        problems.append((f"{who} is in the docker group, which is root on this host",
                         f"gpasswd --delete {access.user} docker (or the installer with "
                         "kael_remove_from_docker_group: true), then restart its Claude Code"))
    if access.socket_reachable is None:
        problems.append((f"whether {who} can use the Docker socket {access.socket} was not "
                         f"tried: {access.socket_detail}", "run image/run-doctor.sh as root"))
    elif access.socket_reachable:
        problems.append((f"{who} can use the Docker socket {access.socket} "
                         f"({access.socket_detail}), which is root on this host",
                         f"leave {access.socket} to root and the docker group only"))
    shown = _not_allowed(access, WRAPPER_LINES, config.instance)
    if shown:
        problems.append((f"sudo does not let {who} run {shown}, so its MCP server or Stop hook "
                         "cannot reach the appliance",
                         "re-run the installer (or image/allow-user.sh --config <config> --user "
                         f"{access.user or '<user>'} as root)"))
    shown = _not_allowed(access, POINTER_WRAPPER_LINES, config.instance) \
        if config.activation is Activation.pointer else ""
    if shown:
        problems.append((f"sudo does not let {who} run {shown}, so its pointer runner "
                         "(KAEL_RUN) can neither wait for a switch after a Stop nor report a "
                         "session it could not start",
                         "re-run the installer, which allows the pointer runner's lines "
                         "(image/allow-user.sh allows only `mcp` and `hook`)"))
    return problems


def _not_allowed(access: ClaudeAccess, roles: tuple[str, ...], instance: str) -> str:
    """Which of the wrapper's lines ROLES of INSTANCE sudo does not allow, as shown; "" for
    none."""
    missing = [f"{role} {instance}" for role in roles if f"{role} {instance}" not in access.allowed]
    return " and ".join(f"`{access.wrapper} {line}`" for line in missing)


def check_claude_access(facts: Facts) -> Check:
    """The Claude user, whose Claude Code runs a model with a shell, has no Docker (root on the
    host) and reaches the appliance only through the wrapper, which sudo allows it for this
    instance's MCP server and Stop hook, and a pointer instance's runner (docs/security.md)."""
    name, config = "claude_access", facts.config
    host = _host(facts, name)
    if isinstance(host, Check):
        return host
    access = host.claude_access
    if access is None:
        return skipped(name, "not checked: the host's facts say nothing of the Claude user's "
                             "access")
    if access.uid == 0:
        return passed(name, "Claude Code runs as root: its hook and MCP server use Docker "
                            "themselves; there is nothing to withhold")
    problems = _access_problems(access, config)
    if problems:
        return failed(name, "; ".join(problem for problem, _ in problems),
                      "; ".join(fix for _, fix in problems))
    roles = WRAPPER_LINES + (POINTER_WRAPPER_LINES if config.activation is Activation.pointer
                             else ())
    return passed(name, f"the Claude user {access.user} is in no docker group, cannot use "
                        f"{access.socket} ({access.socket_detail}); sudo lets it run "
                        f"{access.wrapper} {'|'.join(roles)} {config.instance}")


def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12] or "?"


def _label(labels: dict[str, str] | None, key: str) -> str:
    return (labels or {}).get(key, "unknown")


def _one_daemon(host: HostFacts, instance: str, name: str) -> HostDaemon | Check:
    """The one daemon container of the instance, or the check's result when there is not
    exactly one."""
    if not host.daemons:
        return failed(name, f"no daemon container of instance {instance!r} "
                            f"(label {LABEL_PREFIX}.instance={instance})",
                      "start it: image/run-daemon.sh --config <config>, or re-run the installer")
    if len(host.daemons) > 1:
        return failed(name, f"{len(host.daemons)} daemon containers of instance {instance!r}: "
                            + ", ".join(d.name for d in host.daemons),
                      "docker rm -f all but the one the installer or run-daemon.sh named")
    return host.daemons[0]


def _engine_version(daemon: HostDaemon) -> str:
    """The version the engine in the daemon printed (`kael-thread-rebuild X`), or ""."""
    words = daemon.engine.split()
    return words[-1] if words else ""


def _image_problem(daemon: HostDaemon, image: HostImage) -> str | None:
    """How the daemon's image differs from the installed one: another version, or another
    build of the same version."""
    daemon_version = _label(daemon.image_labels, VERSION_LABEL)
    image_version = _label(image.labels, VERSION_LABEL)
    if daemon_version != image_version:
        return (f"the daemon {daemon.name} runs version {daemon_version} "
                f"({_short(daemon.image_id)}) but {image.ref} is {image_version} "
                f"({_short(image.id)})")
    if daemon.image_id != image.id:
        return (f"the daemon {daemon.name} runs another build of {daemon_version} than "
                f"{image.ref}: {_short(daemon.image_id)} (revision "
                f"{_label(daemon.image_labels, REVISION_LABEL)}) instead of "
                f"{_short(image.id)} (revision {_label(image.labels, REVISION_LABEL)})")
    return None


def _daemon_problems(daemon: HostDaemon, image: HostImage) -> list[str]:
    daemon_version = _label(daemon.image_labels, VERSION_LABEL)
    engine = _engine_version(daemon)
    running = daemon.state == "running"
    problems = []
    if not running:
        problems.append(f"the daemon container {daemon.name} is {daemon.status or daemon.state}")
    image_problem = _image_problem(daemon, image)
    if image_problem:
        problems.append(image_problem)
    if running and engine != daemon_version:
        problems.append(f"the engine in the daemon says {engine or 'nothing'} for image version "
                        f"{daemon_version}")
    return problems


def check_versions(facts: Facts) -> Check:
    """The daemon runs the installed image, and the engine inside it is that image's version."""
    name = "versions"
    host = _host(facts, name)
    if isinstance(host, Check):
        return host
    daemon = _one_daemon(host, facts.config.instance, name)
    if isinstance(daemon, Check):
        return daemon
    image = host.installed_image
    if image is None:
        return failed(name, "the installed image is not on this host",
                      "load it (gunzip -c kael-thread-rebuild-<version>.tar.gz | docker load) or "
                      "pull it, then " + _RESTART)
    problems = _daemon_problems(daemon, image)
    if problems:
        fix = _RESTART if daemon.state == "running" else f"docker start {daemon.name}; {_RESTART}"
        return failed(name, "; ".join(problems), fix)
    return passed(name, f"the daemon {daemon.name} runs {image.ref} "
                        f"{_label(image.labels, VERSION_LABEL)} ({_short(image.id)}), engine "
                        f"{_engine_version(daemon)}; this doctor {__version__}")

