"""Target and identity: the session the base runs, that a switch can act on it (replace the
pointer, restart the unit), that it is the newest transcript, and the version of the Claude Code
running it."""

from __future__ import annotations

import os

from ..claude_code import live as claude_live
from ..claude_code import registry
from ..config import Activation, Config
from ..operations.switchover import activation_problem
from ..switching.pointer import replace_problem
from .facts import Facts
from .model import Check, failed, passed, skipped, warned


def _pointer_unmounted(facts: Facts, name: str) -> Check | None:
    pointer = facts.config.resume_pointer_path
    if pointer is not None and str(pointer.parent) in facts.unmounted:
        return skipped(name, f"not checked here: {pointer.parent} is not mounted in this "
                             "container (the MCP server only reads); image/run-doctor.sh and the "
                             "installer's doctor check it")
    return None


def check_target(facts: Facts) -> Check:
    name = "target"
    unmounted = _pointer_unmounted(facts, name)
    if unmounted is not None:
        return unmounted
    base, identity = facts.base, facts.identity
    if isinstance(base, str):
        return failed(name, base, "choose activation 'tmux' or 'pointer'")
    if isinstance(identity, str):
        return failed(name, identity, target_fix(facts.config))
    shown = " ".join(f"{key}={value}" for key, value in sorted(identity.token.items()))
    if identity.running_session_id:
        shown += f" session={identity.running_session_id}"
    if not base.alive():
        return failed(name, f"{base.name} {shown}: not running a session",
                      target_fix(facts.config))
    return passed(name, f"{base.name} {shown}")


def check_activation(facts: Facts) -> Check:
    """What the switch itself will do to the target is allowed to this uid, asked the way the
    switch does it and without changing anything: the pointer is a regular file it can replace
    (a rename in its directory), and systemd lets it restart the unit."""
    name, config, base = "activation", facts.config, facts.base
    unmounted = _pointer_unmounted(facts, name)
    if unmounted is not None:
        return unmounted
    if isinstance(base, str):
        return skipped(name, "not checked: there is no target (see target)")
    pointer = config.resume_pointer_path
    if pointer is not None and (problem := replace_problem(pointer)):
        return failed(name, problem, f"make {pointer} a regular file (or nothing yet) in a "
                                     "directory this uid can write, and name that path in "
                                     "resume_pointer_path")
    problem = activation_problem(base)
    if problem:
        return failed(name, problem, _restart_fix(config))
    if config.activation is Activation.systemd:
        return passed(name, f"this uid may restart {config.systemd_unit} (systemd asked without "
                            f"restarting it) and can replace the pointer {pointer}")
    if config.activation is Activation.pointer:
        return passed(name, f"this uid can replace the pointer {pointer}")
    return passed(name, "the tmux base respawns the pane the target check reads")


def _restart_fix(config: Config) -> str:
    if config.activation is not Activation.systemd:
        return "see the target check"
    return (f"let this uid ({os.geteuid()}) restart {config.systemd_unit}: the polkit rule of "
            "examples/systemd/README.md for its user, this unit and the verb restart (package "
            "polkitd); or run Claude Code as a user unit of this uid (systemd_bus = \"user\")")


def target_fix(config: Config) -> str:
    """How to give the base a target it can read."""
    if config.activation is Activation.pointer:
        return f"write the running session id to {config.resume_pointer_path}"
    socket = f" on tmux socket {config.tmux_socket}" if config.tmux_socket else ""
    return (f"run Claude Code in tmux pane {config.tmux_target}{socket}, or fix tmux_target "
            "and tmux_socket")


def check_session(facts: Facts) -> Check:
    name, identity = "session", facts.identity
    if isinstance(identity, str):
        return skipped(name, "not checked: the target is unreadable")
    running = identity.running_session_id
    if running is None:
        return skipped(name, "not checked: which session the target runs is unknown "
                             f"({_why_no_session(facts, identity.base)})")
    if not facts.transcripts:
        return skipped(name, f"not checked: the target runs {running}; project_dir holds no "
                             "transcript")
    newest = facts.transcripts[0].stem
    if running == newest:
        return passed(name, f"the target runs {running}, the newest transcript")
    if not (facts.config.project_dir / f"{running}.jsonl").exists():
        return failed(name, f"the target runs {running}, which has no transcript in "
                            "project_dir",
                      "project_dir is not where this Claude Code writes (or it was just "
                      "started and has not written yet: talk to it once)")
    return failed(name, f"the target runs {running}, but the newest transcript is {newest}",
                  "another session is active in project_dir; a switch would be refused until "
                  "only the target's session is written to")


def _why_no_session(facts: Facts, base: str) -> str:
    if base != "tmux":
        return "the target names no session"
    if facts.config.claude_config_dir is None:
        return "set claude_config_dir to read Claude Code's session registry"
    return f"no live entry in {registry.registry_dir(facts.config.claude_config_dir)}"


def check_claude_version(facts: Facts) -> Check:
    """The live Claude Code (and the program a switch starts) is a version this project has
    verified; an unverified one is a warning with the command that verifies it here."""
    name, process = "claude_version", facts.claude_process
    pid = None if isinstance(process, str) else process[0]
    newest = facts.transcripts[0] if facts.transcripts else None
    seen, program = claude_live.sightings(facts.claude_config_dir, pid, newest,
                                          facts.config.resume_command)
    if not seen:
        return skipped(name, claude_live.UNKNOWN)
    detail, all_verified = claude_live.describe(seen)
    if all_verified:
        return passed(name, detail)
    return warned(name, detail, claude_live.verify_hint(program))
