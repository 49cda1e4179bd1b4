"""The words of planned speech items, read again from the source file by line offset.

The plan keeps digests and counts only, so its memory does not grow with the conversation;
the words are read back one item at a time when a candidate is written or the poison pattern is
counted, and each one must match the digest taken during the scan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import InputError
from ..transcript.reader import read_line, text_bytes
from .records import Classifier, SpeechRules, words_match
from .turns import Item


def iter_texts(path: Path, items: Iterable[Item], rules: SpeechRules,
               answer_ids: Iterable[str]) -> Iterator[str]:
    """The words of ITEMS, in order, one at a time (only the current line is held); refuses
    when the file no longer holds them verbatim. ANSWER_IDS: the answer tools' calls the scan
    saw (a result line names only its call)."""
    speech_of = Classifier(rules, answer_ids=answer_ids).speech_of
    offset, said = -1, list[str]()
    try:
        with path.open("rb") as handle:
            for item in items:
                if item.offset != offset:
                    said = list[str]()  # let go of the previous line before reading the next
                    record = read_line(handle.fileno(), item.offset, item.length)
                    said = [speech.text for speech in speech_of(record)]
                    del record
                    offset = item.offset
                text = said[item.slot] if item.slot < len(said) else ""
                if not words_match(hashlib.sha256(text_bytes(text)).hexdigest(), item.digest):
                    raise InputError(f"{path} changed at line {item.source_line} after it was "
                                     "planned; plan again")
                yield text
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} again: {exc}") from None


def read_texts(path: Path, items: Iterable[Item], rules: SpeechRules,
               answer_ids: Iterable[str]) -> list[str]:
    """The words of ITEMS, in order, as a list (for a few items: see `iter_texts`)."""
    return list(iter_texts(path, items, rules, answer_ids))
