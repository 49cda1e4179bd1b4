"""The words of planned speech items, read again from the source file by line offset.

The plan keeps digests and counts only, so its memory does not grow with the conversation;
the words are read back when a candidate is written or the poison pattern is counted, and
each one must match the digest taken during the scan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import InputError
from ..transcript.reader import read_line, text_bytes
from .records import Classifier, SpeechToolMatcher
from .turns import Item


def read_texts(path: Path, items: Sequence[Item], speech_tool_patterns: Iterable[str]) -> list[str]:
    """The words of ITEMS, in order; refuses when the file no longer holds them verbatim."""
    speech_of = Classifier(SpeechToolMatcher(speech_tool_patterns)).speech_of
    cache: dict[int, list[str]] = {}
    texts = []
    try:
        with path.open("rb") as handle:
            for item in items:
                said = cache.get(item.offset)
                if said is None:
                    record = read_line(handle.fileno(), item.offset, item.length)
                    said = [speech.text for speech in speech_of(record)]
                    cache = {item.offset: said}
                text = said[item.slot] if item.slot < len(said) else ""
                if hashlib.sha256(text_bytes(text)).hexdigest() != item.sha256:
                    raise InputError(f"{path} changed at line {item.source_line} after it was "
                                     "planned; plan again")
                texts.append(text)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} again: {exc}") from None
    return texts
