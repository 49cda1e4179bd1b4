"""The token estimate of spec §10: int(cjk * 1.1 + other / token_divisor)."""

from __future__ import annotations

import re

_CJK = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def count_cjk(text: str) -> int:
    return len(_CJK.findall(text)) if not text.isascii() else 0


def tokens_from_counts(chars: int, cjk: int, divisor: float) -> int:
    return int(cjk * 1.1 + (chars - cjk) / divisor)


def estimate_tokens(text: str, divisor: float) -> int:
    return tokens_from_counts(len(text), count_cjk(text), divisor)
