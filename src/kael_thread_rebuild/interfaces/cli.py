"""The `kael-thread-rebuild` command line: one subcommand per action of the table (`actions`).

The table is imported when the parser is built, not at the top: `hook-stop` and `prestart`
must not wait for it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from types import NoneType
from typing import TYPE_CHECKING, Any, get_args

from .. import __version__
from ..state_layout import CONFIG_ENV

if TYPE_CHECKING:
    from ..config import Config
    from ..conversation.scan import SecondHalf
    from .action_model import Action

PROG = "kael-thread-rebuild"
EXIT_CODES = "exit codes: 0 ok, 1 refused or failed (with the reason), 2 usage or config error"


def _option_type(annotation: Any) -> Any:
    """What argparse converts an option's text with: the field's type (without `| None`)."""
    kinds = [kind for kind in get_args(annotation) if kind is not NoneType] or [annotation]
    return kinds[0] if kinds[0] in (int, float, Path) else None


def add_action(commands: argparse._SubParsersAction[argparse.ArgumentParser],
               parent: argparse.ArgumentParser, action: Action[Any, Any]) -> None:
    """ACTION's subcommand: an option per input field, spelled as its `Cli` says."""
    command = commands.add_parser(action.name, parents=[parent], help=action.summary,
                                  description=action.description)
    for name, field, cli in action.fields():
        flag = cli.flag or "--" + name.replace("_", "-")
        spelling: dict[str, Any] = {"dest": name, "help": cli.help}
        if cli.metavar is not None:
            spelling["metavar"] = cli.metavar
        if field.annotation is bool:
            command.add_argument(flag, action="store_true", **spelling)
            continue
        if field.is_required():
            spelling["required"] = True
        else:
            spelling["default"] = field.default
        command.add_argument(flag, type=_option_type(field.annotation), **spelling)
    command.set_defaults(action=action)


def build_parser() -> argparse.ArgumentParser:
    from .actions import ACTIONS

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
    for action in ACTIONS:
        add_action(commands, common, action)
    return parser


def invoke(action: Action[Any, Any], config: Config, args: argparse.Namespace,
           started: SecondHalf | None) -> int:
    """Run ACTION with the parsed options, print its output, return its exit code."""
    from .action_model import Call

    given = action.input.model_validate({name: getattr(args, name)
                                         for name in action.input.model_fields})
    call = Call(config=config, via="cli", config_path=getattr(args, "config", None),
                started=started)
    code: int = action.show(action.run(call, given), args.json)
    return code


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
    args.json = getattr(args, "json", False)
    try:
        config = load_config(getattr(args, "config", None))
        code = invoke(args.action, config, args, started)
    except KaelError as exc:
        exc.report(PROG)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
