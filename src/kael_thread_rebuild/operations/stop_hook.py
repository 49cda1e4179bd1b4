"""The Stop hook's whole job once something waits: record the Stop, log what it did.

It never raises and never prints on stdout: Claude Code runs the hook after every reply and
reads its stdout, so what happened goes to `<state_dir>/hook.log` (stderr when that cannot be
written).
"""

from __future__ import annotations

import sys

from ..config import Config
from ..logline import append_line
from ..state_layout import HOOK_LOG
from ..switching.base import SwitchBase
from .service import record_stop
from .stop_input import StopHookInput


def record_stop_input(config: Config, raw: bytes) -> None:
    """Record one Stop from the hook's raw input; logs what happened, never raises."""
    try:
        _record(config, raw)
    except Exception as exc:
        hook_log(config, f"hook-stop error: {type(exc).__name__}: {exc}")


def _record(config: Config, raw: bytes) -> None:
    from ..switching.factory import make_base  # the bases are imported only when one is needed

    base: SwitchBase | None
    try:
        base = make_base(config)
    except Exception:
        base = None  # the Stop is still recorded; the worker's identity checks still apply
    op = record_stop(config, StopHookInput.parse(raw), base)
    if op is not None:
        line = f"hook-stop: operation {op.operation_id} -> {op.status.value}"
        hook_log(config, f"{line}: {op.error}" if op.error else line)


def hook_log(config: Config, message: str) -> None:
    """One line in `<state_dir>/hook.log`; on stderr when the log cannot be written."""
    try:
        append_line(config.layout.hook_log, message)
    except OSError as exc:
        print(f"hook-stop: {message} (cannot write {HOOK_LOG}: {exc.strerror})", file=sys.stderr)
