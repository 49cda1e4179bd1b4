"""Start reading a large transcript before the engine is imported.

`plan`, `dirty` and `candidate` spend about 0.2 s importing pydantic and building models before
they can read a byte, while the second core waits. Here, with the standard library only, the
command line's config and transcript are located by the same rules the engine applies
(`paths.locate_transcript`: inside project_dir, symlinks resolved), and a child starts reading
the later part of the file. The engine then validates everything properly; `scan` uses the child
only if it read the same file with the same speech-tool patterns, and cancels it otherwise.
`plan` and `dirty` start no child when the state dir's scan cache has an entry that the file takes
up (`scan_cache.takes_up`): they will read only the bytes appended since. Where a child starts,
the C heap keeps what the lines free (`conversation.heap`), in both processes.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checked_config import recall
from ..conversation.heap import keep_freed_heap
from ..conversation.records import SpeechRules
from ..conversation.scan import PARENT_SHARE, SecondHalf, start_second_half
from ..conversation.scan_cache import will_take_up
from ..defaults import DEFAULT_ANSWER_TOOLS, DEFAULT_SPEECH_TOOLS
from ..errors import KaelError
from ..paths import locate_transcript
from ..state_layout import config_path as named_config
from ..state_layout import peeked_state_dir, read_config_file, scan_cache_in

READING_COMMANDS = frozenset({"plan", "dirty", "candidate"})
CACHED_COMMANDS = frozenset({"plan", "dirty"})  # `candidate` always reads the whole file
# The child starts ahead of this process by its imports: about 0.15 s when it validates the
# config (pydantic), less from a checked config (`checked_config`), worth about this many bytes
# of reading. The child takes that much more.
HEAD_START_BYTES = 48 << 20
CHECKED_HEAD_START_BYTES = 16 << 20


def child_share_starts_at(size: int, head_start: int = HEAD_START_BYTES) -> float:
    return max(0.3, PARENT_SHARE - head_start / 2 / max(size, 1))


def prestart(words: Sequence[str]) -> SecondHalf | None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    parser.add_argument("--transcript")
    parser.add_argument("command", nargs="?")
    try:
        known, _ = parser.parse_known_args(words)
    except SystemExit:
        return None
    config_path = named_config(known.config)
    if known.command not in READING_COMMANDS or not config_path:
        return None
    try:
        raw = read_config_file(config_path)
        data = tomllib.loads(raw.decode("utf-8"))
        project = Path(str(data["project_dir"])).expanduser()
        patterns = data.get("speech_tool_pattern", list(DEFAULT_SPEECH_TOOLS))
        answers = data.get("answer_tool_pattern", list(DEFAULT_ANSWER_TOOLS))
        if not project.is_absolute() or not isinstance(patterns, list) \
                or not isinstance(answers, list):
            return None
        path = locate_transcript(project, known.transcript)
        if known.command in CACHED_COMMANDS and _cached(data, path):
            return None
    except (OSError, ValueError, KeyError, RuntimeError, KaelError):
        return None  # the engine reports it properly (RuntimeError: `~user` of no one)
    try:
        size = path.stat().st_size
    except OSError:
        return None
    rules = SpeechRules(tuple(str(p) for p in patterns), tuple(str(p) for p in answers))
    checked = known.command in CACHED_COMMANDS and _checked(raw, data)
    head_start = CHECKED_HEAD_START_BYTES if checked else HEAD_START_BYTES
    return start_second_half(path, rules, fraction=child_share_starts_at(size, head_start),
                             before_fork=keep_freed_heap)


def _checked(raw: bytes, data: dict[str, Any]) -> bool:
    """Whether the command will run from the config's record, without the validator."""
    try:
        return recall(raw, peeked_state_dir(data)) is not None
    except RuntimeError:  # `~user` of no one
        return False


def _cached(data: dict[str, Any], path: Path) -> bool:
    """Whether the scan will be taken up from the state dir's scan cache (the engine's rules:
    `state_layout.scan_cache_in`, `scan_cache.will_take_up`)."""
    state_dir = peeked_state_dir(data)
    return state_dir.is_absolute() and will_take_up(path, scan_cache_in(state_dir))
