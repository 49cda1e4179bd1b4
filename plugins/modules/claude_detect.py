#!/usr/bin/python
"""Ansible module: find the live Claude Code of one instance and how it runs (tmux, systemd,
pointer runner)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claude_detect
short_description: Find one instance's live Claude Code and the base it runs on
description:
  - Scans the host's processes for Claude Code (top-level C(claude) processes, not their
    children) and for reference pointer runners (C(pointer_runner.sh)), keeps those that match
    every option given, and returns the one that is left with everything the installer needs,
    read from the live process (C(/proc/PID/cwd), C(/proc/PID/environ)), never guessed.
  - The base is C(tmux) when the process runs in a tmux pane (its C(TMUX)/C(TMUX_PANE), checked
    with the server, the pane's process being the process or one of its parents), else
    C(systemd) when a service's main process is the process or one of its parents, and
    C(pointer) for a pointer runner. A Claude Code in neither tmux nor systemd is reported as
    seen but has no base.
  - Fails, listing everything seen, when nothing matches or more than one does.
  - Read-only. tmux and systemd are only asked about processes that already match.
version_added: "0.1.0"
options:
  name:
    description: The instance's name, for messages.
    type: str
    required: true
  base:
    description: The base to look for; C(auto) accepts any.
    type: str
    choices: [auto, tmux, systemd, pointer]
    default: auto
  pid:
    description: The process (Claude Code, or the pointer runner) to take.
    type: int
  tmux_socket:
    description: The tmux server, as a socket path or a C(-L) name.
    type: str
  tmux_target:
    description: The pane, as C(session:window.pane), a pane id C(%N) or a session name.
    type: str
  systemd_unit:
    description: The unit running Claude Code (C(.service) may be left out).
    type: str
  pointer_path:
    description:
      - The pointer file a pointer runner, or the start command of a systemd unit, reads. A
        unit matches when a word of its ExecStart names that file.
    type: path
  claude_user:
    description: The user Claude Code runs as.
    type: str
  claude_workdir:
    description: Claude Code's working directory.
    type: path
  claude_config_dir:
    description: Claude Code's config dir (C(CLAUDE_CONFIG_DIR), default C(~/.claude)).
    type: path
  tmux:
    description: The tmux client program.
    type: str
    default: tmux
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    details: Read-only.
notes:
  - Linux only (C(/proc)); run it as root to see other users' processes. Reading another
    user's C(/proc/PID/environ) needs CAP_SYS_PTRACE, which root inside a container does not
    have by default; there, run it as the Claude user (a process it cannot read is listed in
    C(seen) with the reason).
  - A user unit's manager is asked over C(/run/user/UID/bus), through C(runuser) when run as
    root (C(--machine=USER@) would need systemd-machined).
"""

EXAMPLES = r"""
- name: Find the instance "companion" in its tmux pane
  kael.appliance.claude_detect:
    name: companion
    tmux_target: cc:0.0
  register: found

- name: Find a systemd instance
  kael.appliance.claude_detect:
    name: kael
    base: systemd
    systemd_unit: claude-kael
"""

RETURN = r"""
base:
  description: C(tmux), C(systemd) or C(pointer).
  returned: success
  type: str
pid:
  description: The Claude Code process (the runner for the pointer base).
  returned: success
  type: int
argv:
  description: That process's argv.
  returned: success
  type: list
  elements: str
claude_user:
  description:
    - Its user name; C(claude_uid), C(claude_gid), C(claude_home) (its C(HOME)) and
      C(claude_account_home) (the user's home in the passwd database) come with it.
  returned: success
  type: str
claude_workdir:
  description: Its working directory (physical path).
  returned: success
  type: str
claude_config_dir:
  description: Its C(CLAUDE_CONFIG_DIR), else C(~/.claude) of its C(HOME).
  returned: success
  type: str
claude_config_dir_from_env:
  description: Whether C(CLAUDE_CONFIG_DIR) was set in its environment.
  returned: success
  type: bool
project_dir:
  description: C(<config dir>/projects/<encoded workdir>), where its transcripts are.
  returned: success
  type: str
project_dir_exists:
  description: Whether that folder exists yet (Claude Code creates it with the first transcript).
  returned: success
  type: bool
claude_cli:
  description: An argv that runs this Claude Code's program (for C(claude mcp ...)).
  returned: success
  type: list
  elements: str
start_command:
  description:
    - How it was started, for claude_start_command; C(kind) is C(tmux_start_command),
      C(unit_argv), C(exec_start) or C(pointer_runner_argv) and C(value) its value.
  returned: success
  type: dict
tmux:
  description: C(socket), C(target) (session:window.pane), C(pane_id), C(shell) (tmux base).
  returned: success
  type: dict
systemd:
  description: C(unit), C(bus), C(main_pid) (systemd base).
  returned: success
  type: dict
pointer_path:
  description:
    - The pointer file (pointer base); for the systemd base the one given, or the first
      argument of the unit's C(claude-start) (examples/systemd).
  returned: success
  type: str
session_id:
  description: The session it runs, from Claude Code's C(sessions/PID.json), when known.
  returned: success
  type: str
seen:
  description: Every Claude Code and runner seen on the host, one line each.
  returned: always
  type: list
  elements: str
"""

import json
import os
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.command_line import (
    StartCommandError,
    basename,
    is_claude_process,
    program_index,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.project_dir import (
    encode_project_dir,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.spellings import (
    parse_exec_start,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.start_command import (
    POINTER_RUNNERS,
    pointer_path,
    unit_program,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_procs import (
    Proc,
    ancestors,
    cwd,
    environ,
    exe,
    processes,
    systemd_unit,
    user_of,
    which,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import read_as

TIMEOUT = 10


def _run(argv: list[str], extra_env: dict[str, str] | None = None) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env.update(extra_env or {})
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


class Candidate:
    """One Claude Code process, or one pointer runner, with what /proc says about it."""

    def __init__(self, proc: Proc, runner: bool) -> None:
        self.proc, self.runner = proc, runner
        self.env = environ(proc.pid)
        self.cwd = cwd(proc.pid)
        self.user, self.account_home = user_of(proc.uid)
        self.home = self.env.get("HOME") or self.account_home
        configured = self.env.get("CLAUDE_CONFIG_DIR")
        self.config_dir_from_env = bool(configured)
        self.config_dir = os.path.normpath(os.path.join(self.cwd, configured)) if configured \
            else os.path.join(self.home, ".claude")
        self.pointer = pointer_path(proc.argv) if runner else None
        if self.pointer is not None:
            self.pointer = os.path.normpath(os.path.join(self.cwd, self.pointer))
        tmux_env = self.env.get("TMUX", "")
        self.socket = tmux_env.split(",")[0] if tmux_env and not runner else None
        self.pane = self.env.get("TMUX_PANE") if self.socket else None
        self.unit = systemd_unit(proc.pid) if not runner else None
        self.base: str | None = "pointer" if runner else None
        self.tmux: dict[str, str] = {}
        self.systemd: dict[str, Any] = {}
        self.start_command: dict[str, Any] = {}

    def describe(self) -> str:
        if self.base == "tmux":
            where = f"tmux pane {self.tmux['target']} ({self.tmux['pane_id']}) on " \
                    f"{self.tmux['socket']}"
        elif self.base == "systemd":
            where = f"systemd {self.systemd['bus']} unit {self.systemd['unit']}" + (
                f" reading {self.pointer}" if self.pointer else "")
        elif self.base == "pointer":
            where = f"pointer runner of {self.pointer}"
        else:
            hints = [f"TMUX {self.socket} {self.pane}" if self.socket else "",
                     f"cgroup of {self.unit[0]}" if self.unit else ""]
            where = ", ".join(h for h in hints if h) or "neither tmux nor systemd"
        return (f"pid {self.proc.pid} user {self.user} cwd {self.cwd} config "
                f"{self.config_dir} [{where}]: {' '.join(self.proc.argv)}")


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _socket_matches(given: str, socket: str, uid: int) -> bool:
    if "/" in given:
        return _same_path(given, socket)
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return _same_path(os.path.join(base, f"tmux-{uid}", given), socket)


def _scan(table: dict[int, Proc]) -> tuple[list[Candidate], list[str]]:
    """The candidates, and a line for each one whose /proc entries cannot be read."""
    claude = {pid for pid, p in table.items() if is_claude_process(p.argv)}
    runners = {pid for pid, p in table.items()
               if any(basename(w) in POINTER_RUNNERS for w in p.argv)}
    found, unreadable = [], []
    for pid in sorted(claude | runners):
        above = set(ancestors(pid, table))
        if above & (claude | runners):
            continue  # a child of another Claude Code, or a runner's `claude -p` call
        try:
            found.append(Candidate(table[pid], pid in runners))
        except FileNotFoundError:
            continue  # gone
        except OSError as exc:
            unreadable.append(
                f"pid {pid} uid {table[pid].uid}: {' '.join(table[pid].argv)} (cannot read "
                f"its /proc entries: {exc.strerror}; run as root with CAP_SYS_PTRACE, which a "
                "container's root lacks, or as that user)")
    return found, unreadable


def _cheap_match(c: Candidate, params: dict[str, Any]) -> bool:
    """The options that /proc alone can answer."""
    checks = [
        params["pid"] is None or c.proc.pid == params["pid"],
        params["claude_user"] is None or c.user == params["claude_user"],
        params["claude_workdir"] is None or _same_path(c.cwd, params["claude_workdir"]),
        params["claude_config_dir"] is None or _same_path(c.config_dir,
                                                          params["claude_config_dir"]),
        params["pointer_path"] is None or not c.runner or (
            c.pointer is not None and _same_path(c.pointer, params["pointer_path"])),
        params["tmux_socket"] is None or (c.socket is not None and _socket_matches(
            params["tmux_socket"], c.socket, c.proc.uid)),
        params["systemd_unit"] is None or (c.unit is not None and c.unit[0] in (
            params["systemd_unit"], params["systemd_unit"] + ".service")),
        params["base"] != "pointer" or c.runner,
        params["base"] not in ("tmux", "systemd") or not c.runner,
    ]
    return all(checks)


_PANE_FORMAT = "\t".join(("#{pane_id}", "#{pane_pid}", "#{session_name}", "#{window_index}",
                          "#{pane_index}", "#{pane_start_command}"))


def _as_user(c: Candidate) -> list[str]:
    """The argv prefix that runs a command as C's user: nothing when this already is that uid,
    else setpriv (root never follows a path that user chose, such as its tmux socket, which may
    be a symlink to another user's server)."""
    if os.geteuid() == c.proc.uid:
        return []
    return ["setpriv", f"--reuid={c.proc.uid}", f"--regid={c.proc.gid}", "--clear-groups", "--"]


def _ask_tmux(c: Candidate, tmux: str, table_pids: list[int]) -> None:
    if not (c.socket and c.pane):
        return
    client = [*_as_user(c), tmux, "-S", c.socket]
    out = _run([*client, "display-message", "-p", "-t", c.pane, _PANE_FORMAT])
    if not out:
        return
    fields = out.rstrip("\n").split("\t", 5)
    if len(fields) != 6 or not fields[1].isdigit() or int(fields[1]) not in table_pids:
        return
    shell = (_run([*client, "show-options", "-gv", "default-shell"]) or "").strip()
    c.base = "tmux"
    c.tmux = {"socket": c.socket, "pane_id": fields[0],
              "target": f"{fields[2]}:{fields[3]}.{fields[4]}", "session": fields[2],
              "shell": shell or "/bin/sh"}
    c.start_command = {"kind": "tmux_start_command", "value": fields[5]}


def _unit_object(unit: str) -> str:
    escaped = "".join(ch if ch.isalnum() else f"_{ord(ch):02x}" for ch in unit)
    return f"/org/freedesktop/systemd1/unit/{escaped}"


def _user_manager(c: Candidate) -> tuple[list[str], dict[str, str]]:
    """(argv prefix, environment) that reach the user manager of C's user over its bus in
    /run/user/UID: directly as that user, through runuser as root (`--machine=USER@` would
    need systemd-machined, which Debian does not install by default)."""
    runtime = f"/run/user/{c.proc.uid}"
    env = {"XDG_RUNTIME_DIR": runtime, "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/bus"}
    if os.geteuid() == c.proc.uid:
        return [], env
    return ["runuser", "-u", c.user, "--", "env", *(f"{k}={v}" for k, v in env.items())], {}


def _ask_systemd(c: Candidate, table_pids: list[int]) -> None:
    if c.unit is None:
        return
    unit, bus = c.unit
    prefix, env = _user_manager(c) if bus == "user" else ([], {})
    scope = ["--user"] if bus == "user" else []

    def run(*argv: str) -> str | None:
        return _run([*prefix, *argv], env)

    out = (run("systemctl", *scope, "show", "-p", "MainPID", "--value", unit) or "").strip()
    if not out.isdigit() or int(out) not in table_pids:
        return
    c.base = "systemd"
    c.systemd = {"unit": unit, "bus": bus, "main_pid": int(out.strip())}
    exact = run("busctl", *scope, "--json=short", "get-property", "org.freedesktop.systemd1",
                _unit_object(unit), "org.freedesktop.systemd1.Service", "ExecStart")
    try:
        commands = json.loads(exact or "")["data"]
        if len(commands) == 1:  # (path, argv, ignore): path is the program, argv[0] a name
            path, argv = commands[0][0], commands[0][1]
            c.start_command = {"kind": "unit_argv", "value": [path, *argv[1:]]}
            return
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    shown = run("systemctl", *scope, "show", "-p", "ExecStart", unit) or ""
    c.start_command = {"kind": "exec_start", "value": shown.strip()}


#: Start scripts whose first argument is the pointer file (examples/systemd/claude-start).
POINTER_START_SCRIPTS = frozenset({"claude-start"})


def _unit_words(c: Candidate) -> list[str]:
    value = c.start_command.get("value")
    if c.start_command.get("kind") == "unit_argv":
        return unit_program(value)
    try:
        return parse_exec_start(value or "")[0]
    except StartCommandError:
        return []


def _unit_pointer(c: Candidate, given: str | None) -> str | None:
    """The pointer file the unit's start command reads: the one given when a word of it names
    that file, else the first argument of a known start script (claude-start POINTER …)."""
    words = _unit_words(c)
    if given is not None:
        return given if any(os.path.isabs(w) and _same_path(w, given) for w in words) else None
    if len(words) > 1 and basename(words[0]) in POINTER_START_SCRIPTS:
        return words[1]
    return None


def _claude_cli(c: Candidate) -> list[str]:
    argv = c.proc.argv
    if c.runner:
        return [which(c.env.get("CLAUDE_BIN", "claude"), c.env, c.cwd)]
    index = program_index(argv) or 0
    program = which(argv[index], c.env, c.cwd)
    if basename(program).startswith("cli."):  # node …/claude-code/cli.js
        return [exe(c.proc.pid) or argv[0], program]
    return [program]


def _session_id(c: Candidate) -> str | None:
    # The Claude user's file, read as that user: root never follows a path that user chose.
    try:
        return json.loads(read_as(c.proc.uid, c.proc.gid, os.path.join(
            c.config_dir, "sessions", f"{c.proc.pid}.json"))).get("sessionId")
    except (OSError, ValueError, AttributeError):
        return None


def _target_matches(given: str, tmux: dict[str, str]) -> bool:
    return given in (tmux.get("target"), tmux.get("pane_id"), tmux.get("session"))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "base": {"type": "str", "default": "auto",
                     "choices": ["auto", "tmux", "systemd", "pointer"]},
            "pid": {"type": "int"}, "tmux_socket": {"type": "str"},
            "tmux_target": {"type": "str"}, "systemd_unit": {"type": "str"},
            "pointer_path": {"type": "path"}, "claude_user": {"type": "str"},
            "claude_workdir": {"type": "path"}, "claude_config_dir": {"type": "path"},
            "tmux": {"type": "str", "default": "tmux"},
        },
        supports_check_mode=True,
    )
    params = module.params
    table = {p.pid: p for p in processes()}
    seen, unreadable = _scan(table)
    matching = [c for c in seen if _cheap_match(c, params)]
    for c in matching:
        lineage = [c.proc.pid, *ancestors(c.proc.pid, table)]
        if not c.runner:
            _ask_tmux(c, params["tmux"], lineage)
            if c.base is None:
                _ask_systemd(c, lineage)
            if c.base == "systemd":
                c.pointer = _unit_pointer(c, params["pointer_path"])
    wanted = params["base"]
    matching = [c for c in matching if c.base is not None
                and (params["pointer_path"] is None or c.pointer is not None)
                and wanted in ("auto", c.base)
                and (params["tmux_target"] is None or _target_matches(params["tmux_target"],
                                                                      c.tmux))]
    lines = [c.describe() for c in seen] + unreadable
    asked = {k: v for k, v in params.items() if v is not None and k not in ("name", "tmux")
             and not (k == "base" and v == "auto")}
    if len(matching) != 1:
        what = "no Claude Code matches" if not matching else \
            f"{len(matching)} Claude Code processes match"
        shown = "; ".join(lines) or "no Claude Code process and no pointer runner at all"
        module.fail_json(
            msg=f"instance {params['name']}: {what} {asked or '(no narrowing given)'}. Seen: "
                f"{shown}. Narrow it down with tmux_target, tmux_socket, systemd_unit, "
                "pointer_path, claude_workdir, claude_config_dir or pid.",
            seen=lines)
    c = matching[0]
    workdir = os.path.realpath(c.cwd)
    project = os.path.join(c.config_dir, "projects", encode_project_dir(workdir))
    if c.runner:
        c.start_command = {"kind": "pointer_runner_argv", "value": c.proc.argv}
    module.exit_json(
        changed=False, base=c.base, pid=c.proc.pid, argv=c.proc.argv, claude_user=c.user,
        claude_uid=c.proc.uid, claude_gid=c.proc.gid, claude_home=c.home,
        claude_account_home=c.account_home,
        claude_workdir=workdir, claude_config_dir=c.config_dir,
        claude_config_dir_from_env=c.config_dir_from_env, project_dir=project,
        project_dir_exists=os.path.isdir(project), claude_cli=_claude_cli(c),
        start_command=c.start_command, tmux=c.tmux, systemd=c.systemd,
        pointer_path=c.pointer, session_id=_session_id(c), seen=lines,
        msg=f"instance {params['name']}: {c.describe()}")


if __name__ == "__main__":
    main()
