"""The tmux base: Claude Code runs in one tmux pane; switching respawns that pane.

The tmux client is always run with the socket from the config (`-S path` when `tmux_socket`
holds a '/', `-L name` otherwise, the default socket when unset) and with `TMUX` removed from its
environment, so the config alone decides which server is addressed. No command used here starts
a tmux server.

What the respawned process inherits (tmux 3.x): the server's global environment, overlaid by the
target session's environment (`new-session -e`, `set-environment -t`, `update-environment`),
plus `TMUX` and `TMUX_PANE`, except `PATH`: tmux replaces it with the PATH of the tmux client that
asks for the respawn when that client is attached to no session, even over `respawn-pane -e
PATH=…` (measured on 3.3a; a client in the appliance container would hand on the container's
PATH). The respawn is therefore asked for by a client whose PATH is the one the session hands to
any new pane (`pane_path`), and the start check (`start_problem`) looks the program up with that
PATH, on the tmux server's host, through `if-shell` (which runs in the session environment, never
the client's). The respawned process does *not* inherit variables exported inside the old pane's
shell, nor ones given only to an earlier `split-window -e`/`new-window -e`/`respawn-pane -e`. The
environment Claude Code needs (`CLAUDE_CONFIG_DIR`, API settings, ...) must therefore live in the
global or session environment, or be spelled out in `resume_command` (e.g. `env NAME=VALUE`).

While a switch is under way the pane has `remain-on-exit on` (pane option): a new command that
exits at once leaves a dead pane, not a closed one (and not a tmux server gone with its last
pane), so the old session can be respawned in the same place. The pane's own setting comes back
once a session runs healthily again (`switch_done`), or when the switch is given up with the
old process still in the pane (`abandon_switch`, also by recovery after a worker was killed).

The Claude Code process in the pane is part of the identity: Claude Code's registry entry for
a process under the pane (same pid namespace: checked against `/proc`), or, from another pid
namespace, the newest entry naming the pane together with the program tmux sees in the pane's
foreground (`pane_current_command`). A pane where Claude Code was quit has no entry.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..claude_code import registry
from ..config import Config
from ..errors import KaelError, Refused
from .base import Identity, StepHook

TMUX_TIMEOUT_SECONDS = 10.0
#: tmux's PATH for a pane when neither the session nor the global environment has one.
DEFAULT_PANE_PATH = "/usr/bin:/bin"

# The start check, run by `/bin/sh` on the tmux server's host (`if-shell`): $1 workdir, $2 PATH,
# $3 program. Exit 0: it starts; 71: no workdir; 72: not on PATH; 73: not an executable file.
_START_CHECK = """exec >/dev/null 2>&1
cd -- "$1" || exit 71
PATH=$2; export PATH
program=$3
case $program in
  */*) ;;
  *) program=$(command -v "$program") || exit 72 ;;
esac
case $program in
  */*) [ -f "$program" ] && [ -x "$program" ] || exit 73 ;;
esac
exit 0"""
_NO_WORKDIR, _NOT_ON_PATH = 71, 72
#: The pane's own remain-on-exit while a switch keeps the pane (`_UNSET`: it had none).
_KEPT_OPTION, _UNSET = "@kael-thread-rebuild-remain-on-exit", "-"

_FIELDS = ("pane_id", "pane_pid", "pane_dead", "pane_index", "window_panes", "window_index",
           "window_id", "session_id", "window_name", "session_name")
_FORMAT = "\t".join(f"#{{{name}}}" for name in _FIELDS)


class TmuxError(KaelError):
    """tmux could not do what was asked."""


class TmuxUnreachable(TmuxError):
    """No tmux client, or no server on the configured socket."""


class PaneGone(TmuxError):
    """The target does not name an existing pane."""


class TargetAmbiguous(TmuxError):
    """The target does not name exactly one pane."""


class Pane(BaseModel):
    model_config = ConfigDict(frozen=True)

    pane_id: str
    pane_pid: int
    pane_dead: bool
    pane_index: str
    window_panes: int
    window_index: str
    window_id: str
    session_id: str
    window_name: str
    session_name: str


def tmux_command(config: Config) -> list[str]:
    """The tmux client argv prefix for the configured server."""
    socket = config.tmux_socket
    if socket is None:
        return ["tmux"]
    return ["tmux", "-S" if "/" in socket else "-L", socket]


def _target_parts(target: str) -> tuple[str, str, str] | None:
    """`session:window.pane` split into its parts (a leading `=` dropped), or None when
    TARGET does not name a pane that way. Window names may hold dots; session names cannot."""
    session, _, rest = target.partition(":")
    window, _, index = rest.rpartition(".")
    if not (session and window and index):
        return None
    return session.removeprefix("="), window.removeprefix("="), index


def _names(target: str, pane: Pane) -> bool:
    """Whether TARGET names PANE exactly: by pane id, or by session, window and pane each given
    as a name, an index or an id."""
    if target.startswith("%"):
        return target == pane.pane_id
    parts = _target_parts(target)
    return parts is not None and (
        parts[0] in (pane.session_name, pane.session_id)
        and parts[1] in (pane.window_index, pane.window_name, pane.window_id)
        and parts[2] in (pane.pane_index, pane.pane_id))


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no message"


class TmuxBase:
    name = "tmux"

    def __init__(self, config: Config) -> None:
        self._config = config

    @property
    def target(self) -> str:
        return self._config.tmux_target

    def _call(self, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
        """A tmux client command; PATH, when given, is the client's PATH (see the module doc)."""
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        command = tmux_command(self._config)
        if path is not None:
            # The client itself is still found on this process's PATH.
            command[0] = _which_tmux()
            env["PATH"] = path
        try:
            return subprocess.run([*command, *args], env=env, capture_output=True, text=True,
                                  check=False, stdin=subprocess.DEVNULL,
                                  timeout=TMUX_TIMEOUT_SECONDS)
        except FileNotFoundError:
            raise TmuxUnreachable("tmux: the tmux client is not installed (not on PATH)") from None
        except subprocess.TimeoutExpired:
            raise TmuxUnreachable(
                f"tmux: no answer from the server within {TMUX_TIMEOUT_SECONDS:g} s") from None

    def _run(self, *args: str, path: str | None = None) -> str:
        proc = self._call(*args, path=path)
        if proc.returncode != 0:
            message = _one_line(proc.stderr)
            if message.startswith("can't find"):
                raise PaneGone(f"tmux target {self.target!r} not found: {message}")
            if message.startswith(("no server running", "error connecting", "server exited",
                                   "lost server")):
                raise TmuxUnreachable(f"tmux server unreachable: {message}")
            raise TmuxError(f"tmux {args[0]} failed for target {self.target!r}: {message}")
        return proc.stdout

    def pane(self) -> Pane:
        """The one pane the target names exactly.

        The panes are listed and matched here rather than resolved by tmux, which falls back to
        prefix and pattern matches, to the active pane of a window and, for a target that does
        not exist, to some current pane: a stale target could silently address another pane.
        """
        shaped = self.target[1:].isdigit() if self.target.startswith("%") else (
            _target_parts(self.target) is not None)
        if not shaped:
            raise TargetAmbiguous(f"tmux target {self.target!r} does not name one pane; "
                                  "use session:window.pane or a pane id (%N)")
        out = self._run("list-panes", "-a", "-F", _FORMAT)
        try:
            panes = [Pane.model_validate(dict(zip(_FIELDS, line.split("\t", len(_FIELDS) - 1),
                                                  strict=True)))
                     for line in out.splitlines()]
        except (ValueError, ValidationError):
            raise TmuxError(f"tmux list-panes gave an answer this version cannot read: "
                            f"{_one_line(out)!r}") from None
        matches = [pane for pane in panes if _names(self.target, pane)]
        if not matches:
            raise PaneGone(f"tmux target {self.target!r} not found: no such pane on the server")
        if len(matches) > 1:
            found = ", ".join(pane.pane_id for pane in matches)
            raise TargetAmbiguous(f"tmux target {self.target!r} names {len(matches)} panes "
                                  f"({found}); use session:window.pane with indices or a pane id")
        return matches[0]

    def identity(self) -> Identity:
        pane = self.pane()
        entry, checked = self._entry(pane)
        token = {"pane_id": pane.pane_id, "pane_pid": str(pane.pane_pid)}
        if entry is not None:
            token.update(registry.process_token(entry))
            if not checked:
                # From another pid namespace a stale entry (a Claude Code killed with SIGKILL)
                # cannot be told from a live one; what tmux sees in the foreground of the
                # pane's terminal can.
                token["pane_command"] = self._run("display-message", "-p", "-t", pane.pane_id,
                                                  "#{pane_current_command}").strip()
        return Identity(base=self.name, token=token,
                        running_session_id=entry.session_id if entry else None)

    def alive(self) -> bool:
        try:
            return not self.pane().pane_dead
        except (PaneGone, TmuxUnreachable):
            return False

    def switch_to(self, session_id: str, step: StepHook | None = None) -> list[str]:
        workdir = self._workdir()
        pane = self.pane()
        argv = self._config.resume_argv(session_id)
        path = self.pane_path(pane)
        self._keep_pane(pane)
        if step is not None:
            step("respawn")
        # One shell-command word: tmux runs it with `default-shell -c` on every version, whereas
        # several words are exec'd directly only since tmux 3.0 and joined unquoted before.
        # tmux expands formats in -c, where "##" stands for "#".
        self._run("respawn-pane", "-k", "-t", pane.pane_id, "-c", str(workdir).replace("#", "##"),
                  "exec " + shlex.join(argv), path=path)
        return argv

    def running_session(self) -> str | None:
        entry = self._entry_in(self.pane())
        return entry.session_id if entry else None

    def start_problem(self, session_id: str) -> str:
        workdir = self._workdir()
        pane = self.pane()
        program = self._config.resume_argv(session_id)[0]
        path = self.pane_path(pane)
        check = shlex.join(["sh", "-c", _START_CHECK, "sh", str(workdir), path, program])
        where = "on the tmux server's host"
        if self._shell_says(pane, f"{check}; [ $? -eq 0 ]"):
            return ""
        if self._shell_says(pane, f"{check}; [ $? -eq {_NO_WORKDIR} ]"):
            return f"claude_workdir {workdir} is not a directory {where}"
        if self._shell_says(pane, f"{check}; [ $? -eq {_NOT_ON_PATH} ]"):
            return (f"the program {program!r} of resume_command is not found {where} on the PATH "
                    f"a respawned pane gets ({path}, the tmux environment's)")
        return f"the program {program!r} of resume_command is not an executable file {where}"

    def _shell_says(self, pane: Pane, command: str) -> bool:
        """Whether shell COMMAND succeeds, run by tmux (`if-shell`) in PANE's session
        environment on the server's host. if-shell, unlike run-shell, leaves the pane's screen
        alone, whatever the command's status; formats in COMMAND are expanded ("##" is "#")."""
        answer = self._run("if-shell", "-t", pane.pane_id, command.replace("#", "##"),
                           "display-message -p yes", "display-message -p no").strip()
        if answer not in ("yes", "no"):
            raise TmuxError(f"tmux if-shell gave an answer this version cannot read: {answer!r}")
        return answer == "yes"

    def stopped_from_outside(self) -> str:
        """The tmux base cannot tell a pane killed on purpose from a crash: nothing to tell."""
        return ""

    def restarting(self) -> bool:
        return False

    def activation_problem(self) -> str:
        """Respawning the pane needs nothing beyond the socket that the identity is read over."""
        return ""

    def abandon_switch(self, session_id: str) -> None:
        """The pane still runs SESSION_ID: all a switch changed short of that is the pane's
        remain-on-exit."""
        self.switch_done()

    def switch_done(self) -> None:
        pane = self.pane()
        kept = self._pane_option(pane, _KEPT_OPTION)
        if pane.pane_dead or not kept:
            return
        if kept == _UNSET:
            self._run("set-option", "-p", "-u", "-t", pane.pane_id, "remain-on-exit")
        else:
            self._run("set-option", "-p", "-t", pane.pane_id, "remain-on-exit", kept)
        self._run("set-option", "-p", "-u", "-t", pane.pane_id, _KEPT_OPTION)

    def pane_path(self, pane: Pane) -> str:
        """The PATH tmux gives a new pane of PANE's session: the session environment's, else
        the global environment's, else tmux's default."""
        for scope in (("-t", pane.session_id), ("-g",)):
            proc = self._call("show-environment", *scope, "PATH")
            line = proc.stdout.strip()
            if proc.returncode == 0 and line.startswith("PATH="):
                return line.removeprefix("PATH=")
            if proc.returncode == 0 and line == "-PATH":
                break  # removed from the session: the global value does not apply
        return DEFAULT_PANE_PATH

    def _keep_pane(self, pane: Pane) -> None:
        """`remain-on-exit on` for PANE until `switch_done`. The pane's own setting is kept in
        a user option of the pane, so that any later worker (after a restart too) restores it."""
        if not self._pane_option(pane, _KEPT_OPTION):
            own = self._pane_option(pane, "remain-on-exit") or _UNSET
            self._run("set-option", "-p", "-t", pane.pane_id, _KEPT_OPTION, own)
        self._run("set-option", "-p", "-t", pane.pane_id, "remain-on-exit", "on")

    def _pane_option(self, pane: Pane, name: str) -> str:
        """The pane's own value of option NAME; empty when the pane does not set it."""
        return self._run("show-options", "-p", "-q", "-v", "-t", pane.pane_id, name).strip()

    def _workdir(self) -> Path:
        workdir = self._config.claude_workdir
        if workdir is None:
            raise Refused("tmux switching needs claude_workdir in the config "
                          "(--resume only finds sessions of the directory it starts in)")
        return workdir

    def _entry_in(self, pane: Pane) -> registry.RegistryEntry | None:
        return self._entry(pane)[0]

    def _entry(self, pane: Pane) -> tuple[registry.RegistryEntry | None, bool]:
        """Claude Code's registry entry for the process the pane runs, when it has one, and
        whether this process could check it against `/proc` (same pid namespace)."""
        if pane.pane_dead:
            return None, True
        config_dir = self._config.claude_config_dir or Path.home() / ".claude"
        entry = registry.entry_for_tree(config_dir, pane.pane_pid)
        if entry is not None:
            return entry, True
        return registry.entry_for_pane(config_dir, pane.pane_id), False


def _which_tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        raise TmuxUnreachable("tmux: the tmux client is not installed (not on PATH)")
    return found
