"""`kael-thread-rebuild hook-stop`: Claude Code's Stop hook, fast when nothing waits.

Claude Code runs the hook after every reply, reads its stdout, and treats exit code 2 as "do
not stop" (it would feed our words to the model and keep the turn going). So the hook prints
nothing on stdout and always exits 0; what went wrong goes to `<state_dir>/hook.log` or stderr.
Almost always no operation waits for a Stop: that answer comes from the standard library alone,
before the engine (pydantic, the bases) is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from ..defaults import CONFIG_ENV, DEFAULT_STATE_DIR
from ..operations.statuses import something_waits_for_stop


def _config_path(argv: Sequence[str]) -> str | None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    known, _ = parser.parse_known_args(argv)
    return known.config or os.environ.get(CONFIG_ENV) or None


def _nothing_waits(config_path: str | None) -> bool:
    """True only when the config reads and no operation waits; any doubt takes the full path."""
    if config_path is None:
        return False
    try:
        data = tomllib.loads(Path(config_path).read_text(encoding="utf-8"))
        state_dir = Path(str(data.get("state_dir", DEFAULT_STATE_DIR))).expanduser()
    except (OSError, ValueError):
        return False
    return not something_waits_for_stop(state_dir / "operations")


def run(argv: Sequence[str]) -> int:
    raw = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    config_path = _config_path(argv)
    if _nothing_waits(config_path):
        return 0
    with contextlib.redirect_stdout(sys.stderr):
        from ..config import load_config
        from ..errors import KaelError
        from .operation_commands import record_stop_input

        try:
            config = load_config(config_path)
        except KaelError as exc:
            print(f"kael-thread-rebuild hook-stop: {exc}", file=sys.stderr)
            return 0
        record_stop_input(config, raw)
    return 0
