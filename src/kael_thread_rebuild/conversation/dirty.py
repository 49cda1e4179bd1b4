"""The dirty ledger (runtime bytes by category) and the poisoned-context score."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..transcript.json_text import text_bytes
from .records import Dirt

if TYPE_CHECKING:
    from ..reading_settings import PoisonMatcher

RUNTIME_CATEGORIES = [d for d in Dirt if d is not Dirt.bookkeeping]


def dirty_report(tally: Mapping[str, int], conversation_bytes: int, budget: int,
                 viewed_original_image: bool, rebuild_on_image: bool) -> dict[str, Any]:
    """The fields of `plan_report.DirtyReport` (which says what they mean), as JSON values."""
    categories = {category.value: tally.get(category, 0) for category in RUNTIME_CATEGORIES}
    total = sum(categories.values())
    reasons = []
    if total >= budget:
        reasons.append(f"dirty budget reached: {total} >= {budget} bytes of runtime traces")
    if viewed_original_image and rebuild_on_image:
        reasons.append("the model viewed an original image")
    whole = total + conversation_bytes
    return {
        "categories": categories,
        "total_bytes": total,
        "conversation_bytes": conversation_bytes,
        "bookkeeping_bytes": tally.get(Dirt.bookkeeping, 0),
        "noise_ratio": round(total / whole, 4) if whole else 0.0,
        "dirty_budget_bytes": budget,
        "viewed_original_image": viewed_original_image,
        "should_rebuild": bool(reasons),
        "reasons": reasons,
    }


def poison_score(texts: Iterable[str], pattern: PoisonMatcher) -> int:
    """Matches of the poison pattern in TEXTS (the speech of the last turns), in their UTF-8
    bytes (a lone surrogate kept as its three bytes, as the engine measures text)."""
    return sum(len(pattern.findall(text_bytes(text))) for text in texts)
