"""The tmux base: Claude Code runs in one tmux pane; switching respawns that pane.

The tmux client is always run with the socket from the config (`-S path` when `tmux_socket`
holds a '/', `-L name` otherwise, the default socket when unset) and with `TMUX` removed from its
environment, so the config alone decides which server is addressed. No command used here starts
a tmux server.

What the respawned process inherits (tmux 3.x): the server's global environment, overlaid by the
target session's environment (`new-session -e`, `set-environment -t`, `update-environment`),
plus `TMUX` and `TMUX_PANE`. It does *not* inherit variables exported inside the old pane's
shell, nor ones given only to `split-window -e`/`new-window -e`/`respawn-pane -e`. The
environment Claude Code needs (`CLAUDE_CONFIG_DIR`, API settings, ...) must therefore live in the
global or session environment, or be spelled out in `resume_command` (e.g. `env NAME=VALUE`).
"""

from __future__ import annotations

import os
import shlex
import subprocess

from pydantic import BaseModel, ConfigDict, ValidationError

from ..config import Config
from ..errors import KaelError, Refused
from . import registry
from .base import Identity

TMUX_TIMEOUT_SECONDS = 10.0

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

    def _run(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        try:
            proc = subprocess.run([*tmux_command(self._config), *args], env=env,
                                  capture_output=True, text=True, check=False,
                                  stdin=subprocess.DEVNULL, timeout=TMUX_TIMEOUT_SECONDS)
        except FileNotFoundError:
            raise TmuxUnreachable("tmux: the tmux client is not installed (not on PATH)") from None
        except subprocess.TimeoutExpired:
            raise TmuxUnreachable(
                f"tmux: no answer from the server within {TMUX_TIMEOUT_SECONDS:g} s") from None
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
        return Identity(base=self.name,
                        token={"pane_id": pane.pane_id, "pane_pid": str(pane.pane_pid)},
                        running_session_id=self._session_in(pane))

    def alive(self) -> bool:
        try:
            return not self.pane().pane_dead
        except (PaneGone, TmuxUnreachable):
            return False

    def switch_to(self, session_id: str) -> list[str]:
        workdir = self._config.claude_workdir
        if workdir is None:
            raise Refused("tmux switching needs claude_workdir in the config "
                          "(--resume only finds sessions of the directory it starts in)")
        pane = self.pane()
        argv = self._config.resume_argv(session_id)
        # One shell-command word: tmux runs it with `default-shell -c` on every version, whereas
        # several words are exec'd directly only since tmux 3.0 and joined unquoted before.
        # tmux expands formats in -c, where "##" stands for "#".
        self._run("respawn-pane", "-k", "-t", pane.pane_id, "-c", str(workdir).replace("#", "##"),
                  "exec " + shlex.join(argv))
        return argv

    def running_session(self) -> str | None:
        return self._session_in(self.pane())

    def _session_in(self, pane: Pane) -> str | None:
        config_dir = self._config.claude_config_dir
        if config_dir is None or pane.pane_dead:
            return None
        entry = (registry.entry_for_tree(config_dir, pane.pane_pid)
                 or registry.entry_for_pane(config_dir, pane.pane_id))
        return entry.session_id if entry else None
