"""What reading a transcript takes from the config (`plan`, `dirty`, the worker's plan), as
plain values: the keys of `Config` the reading path uses, built from the validated config's JSON.

The config's model (`config.Config`) is the one validator; this holds only what it validated, so
that the command line can run `plan` and `dirty` from a config validated before
(`checked_config`) without importing pydantic, and `Config.reading` gives the same values for
everything else. Standard library and RE2 only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import re2


class CarryOverflow(StrEnum):
    drop_oldest = "drop_oldest"
    block = "block"


class PoisonMatcher(Protocol):
    """A compiled `poison_pattern`: it finds its matches in UTF-8 text."""

    def findall(self, text: bytes) -> list[Any]: ...


def poison_matcher(pattern: str) -> PoisonMatcher:
    """PATTERN compiled by RE2, case-insensitive, for UTF-8 text. RE2 matches in time linear in
    the text whatever the pattern (Python's `re` backtracks: `(a+)+$` over forty letters would
    run for hours), at the price of lookaround and backreferences, which it refuses. Raises
    ValueError saying why RE2 refuses PATTERN."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # its reason goes into the config error, not onto stderr
    try:
        matcher: PoisonMatcher = re2.compile(pattern.encode(), options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(f"is not a regular expression RE2 accepts (no lookaround or "
                         f"backreferences): {reason}") from None
    return matcher


@dataclass(frozen=True, slots=True)
class ReadingSettings:
    """The config keys a plan reads (each means what `Config` says of it)."""

    project_dir: Path
    state_dir: Path
    dirty_budget_bytes: int
    rebuild_on_original_image_view: bool
    include_open_tail: bool
    freeze_startup_snapshot: bool
    carry_max_tokens: int
    carry_overflow: CarryOverflow
    token_divisor: float
    max_event_chars: int
    block_on_unreadable_lines: bool
    poison_pattern: str
    poison_threshold: int
    poison_window_turns: int
    speech_tool_pattern: tuple[str, ...]
    answer_tool_pattern: tuple[str, ...]

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(field.name for field in fields(cls))

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ReadingSettings:
        """The settings from a validated config's JSON values (`as_values`); KeyError,
        TypeError or ValueError when VALUES is not such a thing."""
        return cls(**{name: _FROM_JSON.get(name, _plain)(values[name]) for name in cls.names()})

    def as_values(self) -> dict[str, Any]:
        """The settings as JSON values, as the config's model dumps them."""
        return {field.name: _as_json(getattr(self, field.name)) for field in fields(self)}

    @property
    def poison_regex(self) -> PoisonMatcher:
        return poison_matcher(self.poison_pattern)


def _plain(value: Any) -> Any:
    if not isinstance(value, str | int | float | bool):
        raise TypeError(f"not a plain value: {value!r}")
    return value


def _words(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        raise TypeError(f"not a list of words: {value!r}")
    return tuple(value)


def _path(value: Any) -> Path:
    if not isinstance(value, str):
        raise TypeError(f"not a path: {value!r}")
    return Path(value)


def _as_json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value.value if isinstance(value, StrEnum) else value


_FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "project_dir": _path, "state_dir": _path, "carry_overflow": CarryOverflow,
    "speech_tool_pattern": _words, "answer_tool_pattern": _words,
}
