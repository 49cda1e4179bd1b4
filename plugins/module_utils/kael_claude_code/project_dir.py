"""Claude Code's project folder: the name of `<config dir>/projects/<name>` for a working dir.

Stdlib only, Python 3.9+ (shipped to the managed host like `command_line`).
"""

from __future__ import annotations

import os
import re

_ALNUM = re.compile(r"[a-zA-Z0-9]")


def _java_hash(text: str) -> int:
    data = text.encode("utf-16-le", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (value * 31 + (data[index] | data[index + 1] << 8)) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _base36(number: int) -> str:
    digits, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def encode_project_dir(workdir: str | os.PathLike[str]) -> str:
    """Claude Code's folder name under `<config dir>/projects/` for a physical working dir.
    JavaScript strings are UTF-16: a character outside the BMP (an emoji) is two code units, so
    it becomes two dashes, and the limit of 200 counts code units."""
    path = os.fspath(workdir)
    name = "".join(char if _ALNUM.fullmatch(char) else "-" * (1 + (ord(char) > 0xFFFF))
                   for char in path)
    if len(name) <= 200:
        return name
    return f"{name[:200]}-{_base36(abs(_java_hash(path)))}"
