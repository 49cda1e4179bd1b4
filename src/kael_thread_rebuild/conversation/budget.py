"""Token estimate and the carry budget: over budget, drop whole oldest turns or refuse."""

from __future__ import annotations

from dataclasses import dataclass

from ..reading_settings import CarryOverflow
from .turns import TurnList


@dataclass(slots=True)
class BudgetResult:
    selected: TurnList
    dropped_oldest_turns: int
    estimated_tokens: int
    overflow_tokens: int
    overflow_blocked: bool


def apply_budget(turns: TurnList, fixed_tokens: int, max_tokens: int,
                 overflow: CarryOverflow, divisor: float) -> BudgetResult:
    """FIXED_TOKENS (the snapshot) always travels; the last turn is always kept."""
    # Each turn's tokens are counted again while turns are dropped, not kept (a million-message
    # chat has half a million turns).
    total = fixed_tokens + turns.tokens(divisor)
    if max_tokens == 0 or total <= max_tokens:
        return BudgetResult(turns, 0, total, 0, False)
    if overflow is CarryOverflow.block:
        return BudgetResult(turns, 0, total, total - max_tokens, True)
    dropped = 0
    while total > max_tokens and dropped < len(turns) - 1:
        total -= turns[dropped].tokens(divisor)
        dropped += 1
    return BudgetResult(turns[dropped:], dropped, total, max(0, total - max_tokens), False)
