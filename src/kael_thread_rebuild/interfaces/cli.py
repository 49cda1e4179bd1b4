"""The `kael-thread-rebuild` command line: one subcommand per action of the table (`actions`).

The words are parsed by the parser built from the subcommands' snapshot (`cli_spec`), which
needs no engine: `--help`, `COMMAND --help` and `--version` end there, and a command imports
only the module that declares its action (`plan` and `dirty`: `reading`, not the whole table).
`hook-stop` goes to its own fast path (`hook`) first.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..state_layout import CONFIG_ENV
from .cli_spec import CommandSpec, argparse_options, command_spec, snapshot

if TYPE_CHECKING:
    from ..config import Config
    from ..conversation.scan import SecondHalf
    from .action_model import Action

PROG = "kael-thread-rebuild"
HELP_WORDS = frozenset({"-h", "--help", "--version"})
EXIT_CODES = "exit codes: 0 ok, 1 refused or failed (with the reason), 2 usage or config error"


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                parent: argparse.ArgumentParser, spec: CommandSpec,
                action: Action[Any, Any] | None) -> None:
    """The subcommand SPEC describes; ACTION is what it runs (None: `find_action` imports it
    from the module SPEC names)."""
    command = commands.add_parser(spec["name"], parents=[parent], help=spec["summary"],
                                  description=spec["description"])
    for option in spec["options"]:
        command.add_argument(option["flag"], **argparse_options(option))
    command.set_defaults(action=action, action_module=spec["module"])


def build_parser(*, from_snapshot: bool = False) -> argparse.ArgumentParser:
    """The whole command line, from the action table; FROM_SNAPSHOT: from its snapshot,
    without importing the engine (the parsed words then name their action's module)."""
    actions: dict[str, Action[Any, Any]] = {}
    if from_snapshot:
        specs = snapshot()
    else:
        from .actions import ACTIONS

        actions = {action.name: action for action in ACTIONS}
        specs = [command_spec(action) for action in ACTIONS]
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
    for spec in specs:
        add_command(commands, common, spec, actions.get(spec["name"]))
    return parser


def find_action(args: argparse.Namespace) -> Action[Any, Any]:
    """The action of the parsed subcommand, its module imported if the parser had not."""
    if args.action is not None:
        found: Action[Any, Any] = args.action
        return found
    declared: tuple[Action[Any, Any], ...] = importlib.import_module(args.action_module).ACTIONS
    return next(action for action in declared if action.name == args.command)


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
    asks_help = bool(HELP_WORDS & set(words))
    if "hook-stop" in words and not asks_help:
        from .hook import run

        return run(words)
    if asks_help:
        # Help and the version end here (argparse exits), before `prestart` is imported.
        build_parser(from_snapshot=True).parse_args(words)
    from .prestart import prestart

    started = prestart(words)
    try:
        return _run(words, started)
    finally:
        if started is not None:
            started.cancel()
        if argv is None:
            # The process ends next. The interpreter's last collection would walk every object
            # the command made (10 ms of a 200 MiB plan's 0.64 s): nothing of it needs one.
            gc.freeze()


def _run(words: list[str], started: SecondHalf | None) -> int:
    args = build_parser(from_snapshot=True).parse_args(words)
    args.json = getattr(args, "json", False)
    from ..errors import KaelError
    from .checked_reading import run_checked

    try:
        code = run_checked(args, started)
        if code is None:
            code = _validated_run(args, started)
    except KaelError as exc:
        exc.report(PROG)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return code


def _validated_run(args: argparse.Namespace, started: SecondHalf | None) -> int:
    """ARGS' action with its config validated (and remembered for the next `plan` or `dirty`,
    `checked_config`)."""
    action = find_action(args)
    # Imported here, not at the top: `hook-stop` and `prestart` must not wait for them.
    from ..checked_config import remember
    from ..config import load_config_and_bytes
    from .prestart import CACHED_COMMANDS

    config, raw = load_config_and_bytes(getattr(args, "config", None))
    if args.command in CACHED_COMMANDS:
        remember(config.reading, raw)
    return invoke(action, config, args, started)


if __name__ == "__main__":
    sys.exit(main())
