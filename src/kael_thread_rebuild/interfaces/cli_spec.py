"""The command line's subcommands as plain data, so that `--help` needs no engine.

Building the parser from the action table imports pydantic and every action's models (about
0.2 s); `--help`, `COMMAND --help` and `--version` only print, and a command needs only its own
action. So each subcommand is described by a `CommandSpec` (what argparse is told about it, and
the module that declares its action), the parser is built from those specs
(`cli.build_parser`), and the command line reads them from `cli_snapshot.json`, recorded from
the action table (`python -m kael_thread_rebuild.interfaces.cli_spec`) and checked by a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import NoneType
from typing import TYPE_CHECKING, Any, TypedDict, get_args

if TYPE_CHECKING:
    from .action_model import Action

SNAPSHOT = Path(__file__).with_name("cli_snapshot.json")
# What argparse converts an option's text with, by name (None: the text as it is).
TYPES: dict[str, type] = {"int": int, "float": float, "Path": Path}


class OptionSpec(TypedDict, total=False):
    flag: str
    dest: str
    help: str
    metavar: str
    store_true: bool
    required: bool
    default: Any
    type: str


class CommandSpec(TypedDict):
    name: str
    summary: str
    description: str
    options: list[OptionSpec]
    module: str  # the module that declares its action (`cli` imports only that one)


def _type_name(annotation: Any) -> str | None:
    """The name in TYPES of the field's type (without `| None`), if it is one of them."""
    kinds = [kind for kind in get_args(annotation) if kind is not NoneType] or [annotation]
    return next((name for name, kind in TYPES.items() if kinds[0] is kind), None)


def command_spec(action: Action[Any, Any]) -> CommandSpec:
    """ACTION's subcommand: an option per input field, spelled as its `Cli` says."""
    options: list[OptionSpec] = []
    for name, field, cli in action.fields():
        option: OptionSpec = {"flag": cli.flag or "--" + name.replace("_", "-"), "dest": name,
                              "help": cli.help}
        if cli.metavar is not None:
            option["metavar"] = cli.metavar
        if field.annotation is bool:
            option["store_true"] = True
        elif field.is_required():
            option["required"] = True
        else:
            option["default"] = field.default
        if not option.get("store_true") and (kind := _type_name(field.annotation)):
            option["type"] = kind
        options.append(option)
    return {"name": action.name, "summary": action.summary, "description": action.description,
            "options": options, "module": action.run.__module__}


def argparse_options(option: OptionSpec) -> dict[str, Any]:
    """The keyword arguments of `add_argument` for OPTION (its flag apart)."""
    spelling: dict[str, Any] = {"dest": option["dest"], "help": option["help"]}
    if "metavar" in option:
        spelling["metavar"] = option["metavar"]
    if option.get("store_true"):
        spelling["action"] = "store_true"
        return spelling
    if option.get("required"):
        spelling["required"] = True
    else:
        spelling["default"] = option.get("default")
    spelling["type"] = TYPES[option["type"]] if "type" in option else None
    return spelling


def recorded() -> list[CommandSpec]:
    """The specs of every action, in the table's order (imports the engine)."""
    from .actions import ACTIONS

    return [command_spec(action) for action in ACTIONS]


def snapshot() -> list[CommandSpec]:
    """The specs as recorded in SNAPSHOT (the standard library only)."""
    specs: list[CommandSpec] = json.loads(SNAPSHOT.read_bytes())
    return specs


if __name__ == "__main__":
    from ..fsutil import atomic_write_bytes

    atomic_write_bytes(SNAPSHOT, json.dumps(recorded(), indent=1).encode() + b"\n", 0o644)
