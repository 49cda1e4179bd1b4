"""The small interface every switching base implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict

#: Told the name of each step before it is taken (fault-injection tests kill the worker there).
StepHook = Callable[[str], None]


class Identity(BaseModel):
    """What proves the target is still the one prepared against (compare-and-swap token).

    `base` names the base; `token` holds its fields (tmux: pane_id, pane_pid; systemd: main_pid;
    pointer: content digest), plus, where the base finds Claude Code's registry entry for the
    process it runs, that process's `claude_pid` and `claude_start` (start time in clock ticks):
    a Claude Code quit and replaced by another program, or restarted, changes the token. Two
    identities are equal when base and token are equal.
    """

    model_config = ConfigDict(frozen=True)

    base: str
    token: dict[str, str]
    running_session_id: str | None = None


class SwitchBase(Protocol):
    name: str

    def identity(self) -> Identity:
        """The current identity; raises KaelError with a one-line reason when unreadable."""

    def alive(self) -> bool:
        """Whether the target currently runs something (pane alive, unit active, pointer set)."""

    def switch_to(self, session_id: str, step: StepHook | None = None) -> list[str]:
        """Make the target run SESSION_ID; returns the argv (or pointer content) actually used.
        STEP is told the base's own step between changing something and changing what the
        target runs (systemd: `restart`; tmux: `respawn`)."""

    def abandon_switch(self, session_id: str) -> None:
        """A switch changed nothing the target runs (its identity is the one it had before):
        undo what it did change, so that the target's next start runs SESSION_ID, the session
        it runs (systemd: the pointer; tmux: the pane's remain-on-exit, as `switch_done`)."""

    def running_session(self) -> str | None:
        """The session id the target's Claude Code reports, where it can be known."""

    def start_problem(self, session_id: str) -> str:
        """Why the command that would run SESSION_ID cannot be started in the environment the
        base starts it in, in one line; empty when it can (or when the base starts nothing)."""

    def activation_problem(self) -> str:
        """Why a switch could not act on the target from this process (replace the pointer,
        restart the unit), in one line; empty when it can. Asked before anything is touched."""

    def stopped_from_outside(self) -> str:
        """Why a target that is down was stopped on purpose from outside the engine (an admin's
        `systemctl stop`), in one line: a switch then leaves it stopped. Empty when it was not,
        or when the base cannot tell."""

    def restarting(self) -> bool:
        """Whether a target that is down is being restarted from outside the engine (an admin's
        `systemctl restart`), not crashed: the health check waits for it."""

    def switch_done(self) -> None:
        """The target runs a healthy session again: undo what only the switch needed."""
