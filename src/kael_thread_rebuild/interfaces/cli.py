"""The `kael-thread-rebuild` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import __version__
from ..state_layout import CONFIG_ENV

if TYPE_CHECKING:
    from ..conversation.scan import SecondHalf

PROG = "kael-thread-rebuild"
EXIT_CODES = "exit codes: 0 ok, 1 refused or failed (with the reason), 2 usage or config error"


def build_parser() -> argparse.ArgumentParser:
    from . import claude_pieces, doctor_command, engine_commands, operation_commands

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                        help=f"the instance's TOML config (default: ${CONFIG_ENV})")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON instead of text")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Give a long-running Claude Code session a lossless fresh start: carry "
                    "every real word verbatim onto a new session, verified by code.",
        epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    engine_commands.register(commands, common)
    doctor_command.register(commands, common)
    operation_commands.register(commands, common)
    claude_pieces.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "hook-stop" in words and not {"-h", "--help"} & set(words):
        from .hook import run

        return run(words)
    from .prestart import prestart

    started = prestart(words)
    try:
        return _run(words, started)
    finally:
        if started is not None:
            started.cancel()


def _run(words: list[str], started: SecondHalf | None) -> int:
    # Imported here, not at the top: `hook-stop` and `prestart` must not wait for them.
    from ..config import load_config
    from ..errors import KaelError

    args = build_parser().parse_args(words)
    args.started = started
    args.json = getattr(args, "json", False)
    try:
        config = load_config(getattr(args, "config", None))
        code: int = args.handler(config, args)
    except KaelError as exc:
        for line in str(exc).splitlines():
            print(f"{PROG}: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
