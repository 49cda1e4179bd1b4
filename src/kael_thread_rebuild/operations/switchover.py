"""Talking to the switching base for the worker: identity compare, switch, health check.

Base errors become one-sentence problems here; the worker decides what they mean.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

from ..config import Config
from ..errors import KaelError
from ..switching.base import Identity, StepHook, SwitchBase

T = TypeVar("T")

#: How often the health check looks at the target at most (the switch's downtime waits on it).
HEALTH_POLL_SECONDS = 0.05


def same_target(a: Identity | None, b: Identity | None) -> bool:
    """Compare-and-swap equality: same base and token (the reported session is not part of it)."""
    return a is not None and b is not None and (a.base, a.token) == (b.base, b.token)


def _answer(ask: Callable[[], T], unknown: T) -> T:
    """What the base answers; UNKNOWN when it cannot tell (one line: the KaelError)."""
    try:
        return ask()
    except KaelError:
        return unknown


def read_identity(base: SwitchBase) -> Identity | None:
    return _answer(base.identity, None)


def read_running(base: SwitchBase) -> str | None:
    return _answer(base.running_session, None)


def is_alive(base: SwitchBase) -> bool:
    return _answer(base.alive, False)


def is_restarting(base: SwitchBase) -> bool:
    return _answer(base.restarting, False)


def stopped_from_outside(base: SwitchBase) -> str:
    return _answer(base.stopped_from_outside, "")


def start_problem(base: SwitchBase, session_id: str) -> str:
    """Why the base could not start SESSION_ID's command; a base that cannot tell says why too
    (never read as "go ahead")."""
    try:
        return base.start_problem(session_id)
    except KaelError as exc:
        return f"cannot check that resume_command starts: {exc}"


def activation_problem(base: SwitchBase) -> str:
    """Why the switch could not act on the target (replace the pointer, restart the unit); a
    base that cannot tell says why too (never read as "go ahead")."""
    try:
        return base.activation_problem()
    except KaelError as exc:
        return f"cannot check that the switch can act on the target: {exc}"


def switch_done(base: SwitchBase) -> None:
    """Undo what only the switch needed; a target that cannot be reached keeps it (harmless)."""
    with contextlib.suppress(KaelError):
        base.switch_done()


def switch(base: SwitchBase, session_id: str,
           step: StepHook | None = None) -> tuple[list[str] | None, str]:
    """(argv actually used, problem); the problem is empty when the base accepted the switch.
    STEP hears the base's own steps inside the switch."""
    try:
        return base.switch_to(session_id, step), ""
    except KaelError as exc:
        return None, f"switching to session {session_id} failed: {exc}"


def health_problem(base: SwitchBase, session_id: str, config: Config, must_report: bool,
                   sleep: Callable[[float], None] = time.sleep) -> str:
    """Empty when the target stays alive for the health window and runs SESSION_ID.

    When the base could report the running session at prepare (MUST_REPORT), it must report
    SESSION_ID within the health timeout; otherwise being alive for the window is all it can
    prove. A target that dies is unhealthy at once, unless it is being restarted from outside
    (an admin's `systemctl restart` starts the session its pointer names: this one); once it
    is up again, it gets a window of its own.
    """
    start = time.monotonic()
    window_end = start + config.health_window_seconds
    deadline = start + max(config.health_timeout_seconds, config.health_window_seconds)
    pause = min(config.poll_interval_seconds, HEALTH_POLL_SECONDS)
    restarted = False
    while True:
        if not is_alive(base):
            if time.monotonic() >= deadline or not is_restarting(base):
                return f"the target is not alive after switching to session {session_id}"
            restarted = True  # from outside, onto the same session: not a crash
            sleep(pause)
            continue
        if restarted:  # the restarted process has a window of its own
            restarted = False
            window_end = max(window_end, time.monotonic() + config.health_window_seconds)
            deadline = max(deadline, window_end)
        running = read_running(base)
        now = time.monotonic()
        if now >= window_end and (running == session_id
                                  or (running is None and not must_report)):
            return ""
        if now >= deadline:
            return (f"the target did not report session {session_id} within "
                    f"{config.health_timeout_seconds:g} s (it reports {running or 'none'})")
        # The session is down until this says healthy: look often, and again when the window
        # ends rather than up to a poll later.
        sleep(min(pause, window_end - now) if now < window_end else pause)
