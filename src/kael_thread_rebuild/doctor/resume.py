"""How a switch starts the session: resume_command keeps the live Claude Code's flags and
carries no prompt, and its program starts where the base would start it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import orjson

from ..claude_code.command_line import (
    FlagGroup,
    NoClaude,
    StartCommandError,
    claude_arguments,
    flag_groups,
    missing_flags,
    prompt_words,
)
from ..claude_code.start_command import resume_from_argv
from ..config import Activation, Config
from ..errors import KaelError
from .facts import Facts
from .model import Check, failed, passed, skipped
from .target import target_fix

#: The session id the start check fills in when the target names none (only the words count).
SAMPLE_SESSION = "00000000-0000-4000-8000-000000000000"


def resume_claude_args(resume_command: Sequence[str]) -> tuple[list[str], list[str]]:
    """The Claude Code arguments of a resume command and the wrappers it was seen through: the
    wrappers the installer understands (`bash -lc "… claude …"`, `script -qfc`, `su -c`; `env`
    and `sudo -u` prefixes); a program that names no Claude Code (a start script of the
    household's own) takes the words after it. Raises StartCommandError for a shell command
    whose Claude Code words are only known when it runs."""
    try:
        resume = resume_from_argv(resume_command)
    except NoClaude:
        return list(resume_command[1:]), []
    return resume.claude_args, resume.wrappers


def _carried_prompt(resume_command: Sequence[str]) -> list[str]:
    """The words Claude Code would take as a prompt in a resume command that names it."""
    try:
        return prompt_words(resume_from_argv(resume_command).claude_args)
    except StartCommandError:
        return []


def check_resume_command(facts: Facts) -> Check:
    name, config = "resume_command", facts.config
    process = facts.claude_process
    if isinstance(process, str):
        return skipped(name, f"not checked: {process}")
    pid, argv = process
    live_args = claude_arguments(argv) or []
    try:
        kept_args, wrappers = resume_claude_args(config.resume_command)
    except StartCommandError as exc:
        return failed(name, f"the flags it gives Claude Code cannot be read: {exc}",
                      "spell resume_command as an argv, or as a wrapper whose Claude Code words "
                      "are plain (bash -lc \"cd DIR && exec claude --resume {session_id} …\")")
    prompt = _carried_prompt(config.resume_command)
    if prompt:
        return failed(name, f"carries a prompt, which every switch would send again: "
                            f"{shlex.join(prompt)}", "remove those words from resume_command")
    missing = missing_flags(live_args, kept_args)
    if missing:
        return _lacks_flags(name, config, pid, missing, wrappers)
    kept = flag_groups(live_args)
    through = f" through {' / '.join(wrappers)}" if wrappers else ""
    return passed(name, f"keeps every flag of the live Claude Code (pid {pid}){through}"
                        + (f": {', '.join(group[0] for group in kept)}" if kept else ""))


def _lacks_flags(name: str, config: Config, pid: int, missing: list[FlagGroup],
                 wrappers: list[str]) -> Check:
    shown = ", ".join(" ".join(group) for group in missing)
    detail = (f"lacks flags of the live Claude Code (pid {pid}): {shown}; the resumed "
              "process would run without them (a channel flag lost makes it deaf)")
    current = orjson.dumps(config.resume_command).decode()
    if wrappers:  # the flags belong inside the wrapper's command string
        return failed(name, detail, f"add {shown} to the Claude Code command inside "
                                    f"{wrappers[-1]} of resume_command = {current}")
    suggested = [*config.resume_command, *(word for group in missing for word in group)]
    return failed(name, detail, f"resume_command = {orjson.dumps(suggested).decode()}")


def check_resume_start(facts: Facts) -> Check:
    """The program of resume_command starts where the base would start it (the switch refuses
    otherwise): for tmux, looked up on the tmux server's host with the PATH a respawned pane
    gets; for systemd, the unit's ExecStart program ran its main process."""
    name, config, base = "resume_start", facts.config, facts.base
    if isinstance(base, str):
        return skipped(name, f"not checked: {base}")
    if config.activation is Activation.pointer:
        return skipped(name, "not checked: with activation 'pointer' the runner starts Claude "
                             "Code with its own command")
    identity = facts.identity
    session = (identity.running_session_id if not isinstance(identity, str) else None) \
        or SAMPLE_SESSION
    try:
        problem = base.start_problem(session)
    except KaelError as exc:
        return failed(name, f"cannot check that resume_command starts: {exc}",
                      target_fix(config))
    if problem:
        return failed(name, problem, _start_fix(config))
    if config.activation is Activation.systemd:
        return passed(name, f"unit {config.systemd_unit} runs its ExecStart program")
    return passed(name, f"{config.resume_command[0]!r} starts in the tmux pane's environment "
                        "(looked up on the tmux server's host)")


def _start_fix(config: Config) -> str:
    if config.activation is Activation.systemd:
        return (f"start the unit (systemctl start {config.systemd_unit}) and check its ExecStart "
                f"(systemctl cat {config.systemd_unit})")
    return ("give resume_command's program as an absolute path (what `command -v claude` prints "
            "in the shell Claude Code runs in), or add its directory to the tmux environment's "
            "PATH (tmux set-environment -g PATH ...); claude_workdir must exist on that host")
