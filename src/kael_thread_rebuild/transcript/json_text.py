"""The engine's JSON: values read and written the way Node reads and writes them.

orjson for nearly everything; the standard library for the rare value with a lone surrogate
(`"\\udcff"`, which Node's JSON.stringify writes for a string cut inside a surrogate pair and
orjson refuses), with the same limits (strict UTF-8, no NaN or Infinity).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import orjson

# A `\uD800`-`\uDFFF` escape: Node's JSON.stringify writes one for a lone surrogate (a string cut
# inside a surrogate pair); orjson refuses those, the standard library reads them.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text} is out of range")
    return number


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_line(raw: bytes | bytearray | memoryview) -> Any:
    """One JSON value, read the way Node writes it. Raises ValueError when RAW is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return loads_with_surrogates(raw)


def loads_with_surrogates(raw: bytes | bytearray | memoryview) -> Any:
    """The fallback of `loads_line`, for a line orjson refused."""
    if not _SURROGATE_ESCAPE.search(raw):
        raise ValueError("not JSON")
    try:
        return json.loads(str(raw, "utf-8"), parse_float=_finite,
                          parse_constant=_refuse_constant)
    except RecursionError:  # nested deeper than orjson reads too (its limit is 1024)
        raise ValueError("nested too deeply") from None


def text_bytes(text: str) -> bytes:
    """The bytes a text is digested and measured by: UTF-8, with a lone surrogate kept as its
    own three bytes (so a text that came with one is digested exactly, never refused)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def dumps_line(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """VALUE as one compact JSON line body; a lone surrogate is written back as the escape
    Node writes (`\\udcff`), everything else as orjson writes it. DEFAULT: as for orjson."""
    try:
        return orjson.dumps(value, default=default)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=default)
        return text.encode("utf-8", "backslashreplace")
