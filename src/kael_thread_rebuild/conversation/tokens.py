"""The token estimate of spec §10: int(cjk * 1.1 + other / token_divisor)."""

from __future__ import annotations

import re
from typing import Final

# The characters counted as CJK (first and last code point of each range): CJK punctuation and
# kana, ideographs (extension A and unified), Hangul syllables, compatibility ideographs and the
# fullwidth forms.
CJK_RANGES: Final = ((0x3000, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
                     (0xF900, 0xFAFF), (0xFF00, 0xFFEF))


def _blocks() -> tuple[bytes, bytes, str]:
    """The high bytes of the 256-code-point blocks the ranges fill whole, those they share with
    other characters, and a pattern class of those other characters."""
    covered: dict[int, list[tuple[int, int]]] = {}
    for first, last in CJK_RANGES:
        for high in range(first >> 8, (last >> 8) + 1):
            start, end = high << 8, (high << 8) | 0xFF
            covered.setdefault(high, []).append((max(first, start), min(last, end)))
    whole, shared = bytearray(), bytearray()
    others: list[str] = []
    for high, parts in sorted(covered.items()):
        gaps: list[tuple[int, int]] = []
        at = high << 8
        for first, last in sorted(parts):
            if first > at:
                gaps.append((at, first - 1))
            at = last + 1
        if at <= ((high << 8) | 0xFF):
            gaps.append((at, (high << 8) | 0xFF))
        (shared if gaps else whole).append(high)
        others += (f"{re.escape(chr(first))}-{re.escape(chr(last))}" for first, last in gaps)
    return bytes(whole), bytes(shared), "[" + "".join(others) + "]"


_WHOLE, _SHARED, _OTHERS_CLASS = _blocks()
_OTHERS = re.compile(_OTHERS_CLASS)


def count_cjk(text: str) -> int:
    """How many characters of TEXT are in `CJK_RANGES`, counted by the high byte of each one's
    UTF-16 unit at C speed (a pattern over every character took ten times as long on Chinese
    text, and 5 ms to compile at start-up); the few other characters whose block a range shares
    are taken off by a pattern, only where such a block appears. Characters past U+FFFF (two
    surrogate units) and lone surrogates are not CJK."""
    if text.isascii():
        return 0
    high = text.encode("utf-16-le", "surrogatepass")[1::2]
    count = len(high) - len(high.translate(None, _WHOLE))
    shared = len(high) - len(high.translate(None, _SHARED))
    if shared:
        count += shared - len(_OTHERS.findall(text))
    return count


def tokens_from_counts(chars: int, cjk: int, divisor: float) -> int:
    return int(cjk * 1.1 + (chars - cjk) / divisor)


def estimate_tokens(text: str, divisor: float) -> int:
    return tokens_from_counts(len(text), count_cjk(text), divisor)
