"""The plan's report as the actions return it (`plan`, `dirty`, the MCP tools, the operation
record): the models of the facts `plan.build_plan` gathers, which validate them."""

from __future__ import annotations

from pydantic import BaseModel


class DirtyReport(BaseModel):
    """Runtime bytes that Claude Code sends to the model on resume, by category.

    `conversation_bytes` (the carried words) is shown apart and never counts toward the budget;
    `bookkeeping_bytes` (records the model never sees) is reported apart too.
    """

    categories: dict[str, int]
    total_bytes: int
    conversation_bytes: int
    bookkeeping_bytes: int
    noise_ratio: float
    dirty_budget_bytes: int
    viewed_original_image: bool
    should_rebuild: bool
    reasons: list[str]


class PlanReport(BaseModel):
    source_path: str
    source_sha256: str
    source_bytes: int
    source_session_id: str
    claude_code_version: str | None
    source_turns: int
    selected_turns: int
    open_tail_turns: int
    open_tail_carried: bool
    dropped_oldest_turns: int
    dropped_open_tail_items: int
    source_speech_items: int
    carried_speech_items: int
    estimated_tokens: int
    overflow_blocked: bool
    overflow_tokens: int
    poison_score: int
    startup_frozen: bool
    startup_sha256: str | None
    unreadable_lines: list[int]
    impossible_lines: list[int]
    torn_final_line: bool
    abandoned_branch_records: int
    branch_file_order_fallback: bool
    bridged_missing_parents: int
    dropped_leading_assistant_items: int
    speech_by_origin: dict[str, int]
    blocked_reason: str
    notes: list[str]
    dirty: DirtyReport
