"""`kael-thread-rebuild hook-stop`: Claude Code's Stop hook, fast when nothing waits.

Claude Code runs the hook after every reply, reads its stdout, and treats exit code 2 as "do
not stop" (it would feed our words to the model and keep the turn going). So the hook prints
nothing on stdout and always exits 0; what went wrong goes to `<state_dir>/hook.log` or stderr.
Almost always no operation waits for a Stop: that answer comes from the standard library alone,
before the engine (pydantic, the bases) is imported, and before stdin is read at all. When an
operation waits, stdin is read until EOF or a whole JSON object, within a size and a time bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import time
from collections.abc import Sequence

from ..defaults import STOP_INPUT_MAX_BYTES, STOP_INPUT_SECONDS
from ..operations.statuses import something_waits_for_stop
from ..state_layout import StateLayout, config_path_in, peek_config, peeked_state_dir


def _nothing_waits(config_path: str | None) -> bool:
    """True only when the config reads and no operation waits; any doubt takes the full path."""
    if config_path is None:
        return False
    try:
        state_dir = peeked_state_dir(peek_config(config_path))
        return not something_waits_for_stop(StateLayout(state_dir).operations)
    except (OSError, ValueError, RuntimeError):  # RuntimeError: `~user` of no one
        return False


def _read_enough(data: bytes | bytearray) -> bool:
    """Whether DATA is a whole JSON object, or one nested too deeply to read whatever follows
    (the engine then fails the operation: the input is not JSON it can read)."""
    if not data.rstrip().endswith(b"}"):
        return False
    try:
        json.loads(data)
    except ValueError:
        return False
    except RecursionError:
        return True
    return True


def read_stop_input(limit: int = STOP_INPUT_MAX_BYTES,
                    seconds: float = STOP_INPUT_SECONDS) -> bytes:
    """The hook's JSON from stdin: read until EOF or a whole JSON object, but no more than
    LIMIT + 1 bytes (more means too long) and for no longer than SECONDS."""
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    fd = sys.stdin.fileno()
    deadline = time.monotonic() + seconds
    data = bytearray()
    while len(data) <= limit:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, min(1 << 16, limit + 1 - len(data)))
        if not chunk:
            break
        data += chunk
        if _read_enough(data):
            break
    return bytes(data)


def run(argv: Sequence[str]) -> int:
    config_path = config_path_in(argv)
    if _nothing_waits(config_path):
        return 0  # stdin is not even read: nothing can hold this Stop
    raw = read_stop_input()
    with contextlib.redirect_stdout(sys.stderr):
        from ..config import load_config
        from ..errors import KaelError
        from ..operations.stop_hook import record_stop_input

        try:
            config = load_config(config_path)
        except KaelError as exc:
            exc.report("kael-thread-rebuild hook-stop")
            return 0
        record_stop_input(config, raw)
    return 0
