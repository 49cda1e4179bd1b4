#!/usr/bin/python
"""Ansible module: Claude Code's start command -> the exact argv and the resume command."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claude_start_command
short_description: Derive the resume command from Claude Code's live start command
description:
  - Reads one spelling of the command that started Claude Code and returns it as an exact argv
    plus C(resume_command), the argv that resumes a given session with every other word kept
    as it was (channels, plugins, thinking display, model, C(env VAR=...) prefixes, wrappers).
  - C(--continue), C(-c), C(--resume [X]), C(-r [X]), C(--session-id X) and C(--fork-session)
    are replaced by one C(--resume {session_id}) (added when absent); an initial prompt (words
    that belong to no option, and everything after C(--)) is left out, since resuming must not
    send it again.
  - Shell wrappers (C(bash -lc "..."), C(sh -c), C(script -qfc "..." /dev/null), C(su -c))
    are seen through and kept, their command string edited in place. Inside shell text only
    C(cd DIR &&) prefixes, C(exec), variable assignments and words are understood; pipes,
    lists, redirections and expansions that may split into several words among Claude Code's
    arguments are refused with a message naming what was seen.
  - With O(live_pid) or O(live_argv) the result is checked against the running Claude Code
    process, and the module fails when the resume command would lose any of its flags (the
    "deaf process" check).
  - With O(live_pid), a program of the resume command named without a path (its first word,
    and the Claude Code program) becomes an absolute path, looked up in the C(PATH) of the live
    process's own environment (C(/proc/PID/environ)) as its shell did. The switch runs the
    command where another C(PATH) applies (a tmux client in the appliance's container), so a
    bare C(claude) found only through the user's login C(PATH) would not start there.
  - Read-only; nothing on the host changes.
version_added: "0.1.0"
options:
  argv:
    description: The start command as an exact argv (a process's arguments, a runner's).
    type: list
    elements: str
  pid:
    description: Read the start command from C(/proc/PID/cmdline) on the managed host.
    type: int
  unit_argv:
    description:
      - A systemd unit's ExecStart as an exact argv (from D-Bus, e.g.
        C(busctl --json=short get-property ... ExecStart)). Like O(argv), but C($VAR) words,
        which systemd expands at start, are refused.
    type: list
    elements: str
  exec_start:
    description:
      - The output of C(systemctl show -p ExecStart UNIT) (C({ path=... ; argv[]=... ; ... })),
        with or without C(ExecStart=). systemctl joins the arguments with single spaces, so an
        argument holding a space cannot be told apart; prefer O(unit_argv) and pass O(live_pid).
    type: str
  tmux_start_command:
    description:
      - A tmux C(#{pane_start_command}), in tmux's own quoting. One word is a command string
        that tmux ran with its default shell (see O(shell)); several words are an argv.
    type: str
  shell_command:
    description: A command string run by a shell (C(SHELL -c STRING)).
    type: str
  pointer_runner_argv:
    description:
      - The argv of the reference pointer runner (C(bash pointer_runner.sh POINTER ARGS...));
        the resume command spells the runner's C(claude -p --resume ID ARGS...) call.
    type: list
    elements: str
  shell:
    description:
      - The shell that runs a command string (tmux's C(default-shell)). A command string that
        is more than plain words is resumed as C(SHELL -c STRING).
    type: str
    default: /bin/sh
  claude:
    description: The Claude Code program a pointer runner calls (its C(CLAUDE_BIN)).
    type: str
    default: claude
  live_pid:
    description:
      - The live Claude Code process; the module fails when any of its flags is lost, and the
        programs of the resume command are made absolute from its environment.
    type: int
  live_argv:
    description: The live Claude Code process's argv, instead of O(live_pid).
    type: list
    elements: str
  fallback_to_live:
    description:
      - When the start command names no Claude Code (a tmux pane that started a shell in which
        C(claude) was typed), derive from the live process's argv instead.
    type: bool
    default: false
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    details: Read-only; there is nothing to show a difference of.
"""

EXAMPLES = r"""
- name: Resume command of a systemd unit, checked against its live process
  kael.appliance.claude_start_command:
    unit_argv: "{{ (exec_start.stdout | from_json).data[0][1] }}"
    live_pid: "{{ detected.pid }}"

- name: Resume command of a tmux pane
  kael.appliance.claude_start_command:
    tmux_start_command: "{{ detected.start_command.value }}"
    shell: /bin/bash
    live_pid: 4242
    fallback_to_live: true
  register: started

- name: The incident of 0815, kept whole
  kael.appliance.claude_start_command:
    argv: [claude, --continue, --channels, plugin:telegram@claude-plugins-official,
           --dangerously-load-development-channels, server:companion]
# resume_command: [claude, --resume, "{session_id}", --channels, ...]
"""

RETURN = r"""
resume_command:
  description: The argv that resumes session C({session_id}) with every other word kept.
  returned: success
  type: list
  elements: str
  sample: [claude, --resume, "{session_id}", --channels, "plugin:telegram@claude-plugins-official"]
start_argv:
  description: The start command as an exact argv.
  returned: success
  type: list
  elements: str
claude_args:
  description: The words after the Claude Code program in the start command.
  returned: success
  type: list
  elements: str
flags:
  description: Each option of the resume command with its values (session flags left out).
  returned: success
  type: list
  elements: list
wrappers:
  description: Wrappers seen through, outermost first (e.g. C(bash -lc), C(script -qfc)).
  returned: success
  type: list
  elements: str
dropped:
  description: Words of the start command left out (session flags, an initial prompt).
  returned: success
  type: list
  elements: str
source:
  description: Which option the command was read from (C(live) when O(fallback_to_live) applied).
  returned: success
  type: str
live_checked:
  description: Whether the result was checked against the live process's flags.
  returned: success
  type: bool
notes:
  description: Assumptions made while reading the command.
  returned: success
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.command_line import (
    NoClaude,
    StartCommandError,
    flag_groups,
    program_index,
    show,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.start_command import (
    Resume,
    check_live,
    resume_from_argv,
    resume_from_exec_start,
    resume_from_pointer_runner,
    resume_from_shell,
    resume_from_tmux,
    resume_from_unit_argv,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_procs import (
    cwd,
    environ,
    read_cmdline,
    which,
)

SOURCES = ("argv", "pid", "unit_argv", "exec_start", "tmux_start_command", "shell_command",
           "pointer_runner_argv")


def _derive(module: AnsibleModule, source: str) -> Resume:
    value = module.params[source]
    params = module.params
    if source == "argv":
        return resume_from_argv(value)
    if source == "pid":
        return resume_from_argv(read_cmdline(value))
    if source == "unit_argv":
        return resume_from_unit_argv(value)
    if source == "exec_start":
        return resume_from_exec_start(value)
    if source == "tmux_start_command":
        return resume_from_tmux(value, params["shell"])
    if source == "shell_command":
        return resume_from_shell(value, params["shell"])
    return resume_from_pointer_runner(value, params["claude"])


def _absolute(argv: list[str], pid: int) -> list[str]:
    """ARGV with its first word and its Claude Code program as absolute paths, looked up the
    way the live process PID's shell did: its PATH, its working directory."""
    env, directory = environ(pid), cwd(pid)
    out = list(argv)
    claude = program_index(argv)
    for index in sorted({0} | ({claude} if claude is not None else set())):
        found = which(out[index], env, directory)
        if not os.path.isabs(found):
            raise StartCommandError(
                f"{out[index]!r} is not found on the PATH of the live process {pid} "
                f"({env.get('PATH', 'none set')}); give the instance's resume_command with "
                "the program's absolute path")
        out[index] = found
    return out


def main() -> None:
    list_of_str = {"type": "list", "elements": "str"}
    module = AnsibleModule(
        argument_spec={
            "argv": list_of_str, "pid": {"type": "int"}, "unit_argv": list_of_str,
            "exec_start": {"type": "str"}, "tmux_start_command": {"type": "str"},
            "shell_command": {"type": "str"}, "pointer_runner_argv": list_of_str,
            "shell": {"type": "str", "default": "/bin/sh"},
            "claude": {"type": "str", "default": "claude"},
            "live_pid": {"type": "int"}, "live_argv": list_of_str,
            "fallback_to_live": {"type": "bool", "default": False},
        },
        mutually_exclusive=[SOURCES, ("live_pid", "live_argv")],
        required_one_of=[SOURCES],
        supports_check_mode=True,
    )
    params = module.params
    source = next(name for name in SOURCES if params[name] is not None)
    try:
        live = params["live_argv"]
        if live is None and params["live_pid"] is not None:
            live = read_cmdline(params["live_pid"])
    except OSError as exc:
        module.fail_json(msg=f"cannot read the live process {params['live_pid']}: {exc}")
    try:
        try:
            resume = _derive(module, source)
        except NoClaude:
            if not (params["fallback_to_live"] and live):
                raise
            resume, source = resume_from_argv(live), "live"
        missing = check_live(resume, live) if live else []
        if params["live_pid"] is not None:
            resume = resume._replace(argv=_absolute(resume.argv, params["live_pid"]))
    except StartCommandError as exc:
        module.fail_json(msg=f"{source}: {exc}", source=source)
    except OSError as exc:
        module.fail_json(msg=f"cannot read the start command ({source}): {exc}", source=source)
    if missing:
        module.fail_json(
            msg=f"the resume command derived from {source} would lose flags the live Claude Code "
                f"runs with: {show(missing)}; a process resumed without them is deaf to those "
                "channels. Give the instance's resume_command explicitly.",
            resume_command=resume.argv, live_argv=live, missing=[list(g) for g in missing])
    module.exit_json(
        changed=False, resume_command=resume.argv, start_argv=resume.start_argv,
        claude_args=resume.claude_args, flags=[list(g) for g in flag_groups(resume.resume_args)],
        wrappers=resume.wrappers, dropped=resume.dropped, source=source,
        live_checked=bool(live), notes=resume.notes,
        msg=f"resume_command: {resume.argv}")


if __name__ == "__main__":
    main()
