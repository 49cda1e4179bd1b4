"""How commands print: JSON for machines (`--json`), aligned `key: value` lines for people."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import one_line

if TYPE_CHECKING:
    from pydantic import BaseModel


def _lines(value: Any, indent: int = 0) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        width = max((len(str(key)) for key in value), default=0)
        for key, item in value.items():
            if isinstance(item, dict) and item:
                lines.append(f"{pad}{key}:")
                lines.extend(_lines(item, indent + 1))
            elif isinstance(item, list) and item and isinstance(item[0], dict):
                lines.append(f"{pad}{key}: {len(item)} entries")
            else:
                shown = ", ".join(map(str, item)) if isinstance(item, list) else item
                if shown is None or shown == "":
                    shown = "-"
                lines.append(f"{pad}{str(key).ljust(width)}  {shown}")
    return lines


def write_lines(lines: Iterable[str]) -> None:
    """LINES on stdout, each kept one line: a line break or another control character in a
    value (a path, a reason) is shown escaped, as in error messages."""
    sys.stdout.write("".join(f"{one_line(line)}\n" for line in lines))


def emit(value: BaseModel | dict[str, Any], as_json: bool) -> None:
    data = value if isinstance(value, dict) else value.model_dump(mode="json")
    if as_json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_lines(_lines(data) or [""])
