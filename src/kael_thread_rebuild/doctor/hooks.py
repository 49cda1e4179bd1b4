"""Claude Code integration, the Stop hook: a settings file runs hook-stop for this instance
(and, with activation 'pointer', none does), and the last Stop that left a trace reached the
engine."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..claude_code.settings import HOOK_STOP as HOOK_COMMAND
from ..claude_code.settings import (
    HOOK_WRAPPER,
    OTHER,
    Instance,
    hook_instance,
    stop_hook_commands,
)
from ..config import Activation
from ..state_layout import DEFAULT_STATE_DIR, peek_config
from .facts import Facts
from .model import Check, failed, passed, skipped
from .reading import read_json, tail

#: How the wrapper's lines in hook.log start; the one that follows failures once it gets through.
HOOK_WRAPPER_LINE = "hook-wrapper:"
HOOK_WRAPPER_RECOVERED = "hook-wrapper: reached "
#: How much of the end of hook.log doctor reads.
HOOK_LOG_TAIL_BYTES = 64 * 1024


def _settings_files(facts: Facts) -> list[Path]:
    files = [facts.claude_config_dir / "settings.json"]
    workdir = facts.config.claude_workdir
    if workdir is not None:
        files += [workdir / ".claude" / name for name in ("settings.json", "settings.local.json")]
    return files


def _peek_config(path: str) -> Instance | None:
    """Another config file's instance and state dir, read the way the hook's fast path reads it
    once the shell that runs the hook expanded `~` in PATH; None when it cannot be read from
    here. The state dir is kept as the file spells it: `claude_code.settings` decides where it
    is (and whether it can be placed here at all)."""
    try:
        data = peek_config(os.path.expanduser(path))
    except (OSError, ValueError):
        return None
    name = str(data.get("instance", "default"))
    return Instance(path, str(data.get("state_dir", DEFAULT_STATE_DIR)), name)


def check_stop_hook(facts: Facts) -> Check:
    name = "stop_hook"
    ours: list[tuple[Path, str]] = []
    others: list[str] = []
    problems = []
    config = facts.config
    this = Instance(None if facts.config_path is None else str(facts.config_path),
                    str(config.state_dir), config.instance)
    for path in _settings_files(facts):
        data, problem = read_json(path)
        if problem:
            problems.append(problem)
        for _, _, command in stop_hook_commands(data):
            served = hook_instance(command, this, _peek_config)
            if served is None:
                continue
            if served.verdict == OTHER:
                others.append(f"{command!r} in {path} ({served.why})")
            else:  # this instance's, or nothing in it says otherwise
                ours.append((path, command))
    if facts.config.activation is Activation.pointer:
        if ours:
            path, command = ours[0]
            return failed(name, f"{path} has a Stop hook for this instance ({command}), but "
                                "with activation 'pointer' the runner passes every Stop to "
                                "hook-stop itself: each Stop would reach the engine twice "
                                "(docs/pointer-runner.md)",
                          f"remove that entry from hooks.Stop in {path}")
        return skipped(name, "not used with activation 'pointer': the runner passes every Stop "
                             "to hook-stop itself (docs/pointer-runner.md); no settings file "
                             "has one for this instance, as it should be")
    if ours:
        path, command = ours[0]
        return passed(name, f"in {path}: {command}")
    where = facts.claude_config_dir / "settings.json"
    detail = (f"no Stop hook running `{HOOK_WRAPPER}` or `{HOOK_COMMAND}` for this instance "
              f"in {where}")
    if others:
        detail += f"; only hooks of another instance: {'; '.join(others)}"
    if problems:
        detail += f" ({'; '.join(problems)})"
    return failed(name, detail,
                  f"add {{\"type\": \"command\", \"command\": \"{HOOK_WRAPPER} --container "
                  "<daemon container> --config <config> --state-dir <state dir>\", \"timeout\": "
                  f"10}} (the appliance; `kael-thread-rebuild --config <config> {HOOK_COMMAND}` "
                  f"where the engine runs on the host) to hooks.Stop[].hooks in {where}, or "
                  "re-run the installer (Claude Code has been seen dropping `hooks` when it "
                  "rewrites the file)")


def _message(line: str) -> str:
    return line.partition(" ")[2]  # after the timestamp


def check_hook_delivery(facts: Facts) -> Check:
    """The last Stop that left a trace in hook.log reached the engine. The wrapper logs
    `hook-wrapper: …` when it could not reach the daemon, and `hook-wrapper: reached … again`
    at the first Stop that does after that; hook-stop logs `hook-stop…` for the Stops it
    records. A Stop that reached the engine and found nothing waiting leaves no line."""
    name = "hook_delivery"
    path = facts.config.layout.hook_log
    try:
        text = tail(path, HOOK_LOG_TAIL_BYTES)
    except FileNotFoundError:
        return passed(name, f"no {path} yet: no Stop has failed to reach the engine")
    except OSError as exc:
        return failed(name, f"{path} cannot be read: {exc.strerror or exc}",
                      f"chown {path} to the Claude Code user, mode 0600")
    last = None
    for line in text.splitlines():
        if _message(line).startswith((HOOK_WRAPPER_LINE, HOOK_COMMAND)):
            last = line
    if last is None:
        return passed(name, f"no Stop has failed to reach the engine ({path})")
    message = _message(last)
    if message.startswith(HOOK_COMMAND):
        return passed(name, f"the last logged Stop reached the engine: {last}")
    if message.startswith(HOOK_WRAPPER_RECOVERED):
        return passed(name, f"the hook reaches the daemon again: {last}")
    container = re.search(r"docker exec into (\S+) failed", message)
    start = f"docker start {container.group(1)}" if container else "docker start <daemon>"
    return failed(name, f"the last Stop did not reach the engine: {last}",
                  f"start the daemon container ({start}, or image/run-daemon.sh, or re-run the "
                  "installer); if it runs, fix what the line says (e.g. the Claude Code user "
                  "may not use the Docker socket). The check clears with the next Stop that gets "
                  "through")
