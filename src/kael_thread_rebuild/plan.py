"""The read-only plan: what a rebuild of one transcript would carry, and whether it may run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .conversation.branch import Branch, active_branch
from .conversation.budget import BudgetResult, apply_budget
from .conversation.dirty import dirty_report, poison_score
from .conversation.records import Origin, SpeechRules
from .conversation.scan import Scan, SecondHalf
from .conversation.scan_cache import cached_scan
from .conversation.snapshot import Snapshot, find_snapshot
from .conversation.texts import iter_texts, read_texts
from .conversation.tokens import estimate_tokens
from .conversation.turns import Item, TurnList, build_turns
from .errors import InputError
from .reading_settings import ReadingSettings
from .state_layout import scan_cache_in
from .transcript.reader import ReadStats

if TYPE_CHECKING:
    from .config import Config
    from .plan_report import PlanReport

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(slots=True)
class Plan:
    # The report's fields as JSON values (what `--json` prints), made without pydantic.
    facts: dict[str, Any]
    source_path: Path
    snapshot: Snapshot | None
    turns: TurnList
    model: str | None
    cwd: str | None
    rules: SpeechRules
    # The answer tools' calls the scan saw: what tells their results when read again.
    answer_ids: frozenset[str]
    _report: PlanReport | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def report(self) -> PlanReport:
        """The facts, validated by their model."""
        if self._report is None:
            from .plan_report import PlanReport

            self._report = PlanReport.model_validate(self.facts)
        return self._report

    @property
    def blocked(self) -> bool:
        return bool(self.facts["blocked_reason"])

    @property
    def items(self) -> list[Item]:
        return list(self.turns.items())

    def texts(self, items: list[Item] | None = None) -> list[str]:
        """The words of ITEMS (default: every selected item), read again and verified."""
        wanted = self.items if items is None else items
        return read_texts(self.source_path, wanted, self.rules, self.answer_ids)

    def iter_texts(self) -> Iterator[str]:
        """The words of every selected item, one at a time (see `texts.iter_texts`)."""
        return iter_texts(self.source_path, self.turns.items(), self.rules, self.answer_ids)


def build_plan(settings: Config | ReadingSettings, path: Path, *,
               parallel: bool | None = None, started: SecondHalf | None = None,
               cached: bool = False) -> Plan:
    """One streaming pass over PATH, then the branch walk, turns, snapshot, budget and checks.

    PARALLEL: None lets a large file be read by two processes when that is safe. STARTED: a
    child already reading PATH's second part (see `interfaces.prestart`). CACHED: take the
    pass up from the state dir's scan cache when it has PATH (see `scan_cache`).
    """
    config = settings if isinstance(settings, ReadingSettings) else settings.reading
    scanned = _scan(config, path, parallel, started, scan_cache_dir(config) if cached else None)
    classifier, stats = scanned.read, scanned.stats
    classifier.table.release_lookups()  # every record is in (and the scan cache written)
    branch = active_branch(classifier.table, classifier.speech.rows_of(Origin.advisor_answer))
    snapshot = find_snapshot(branch.rows, classifier) if config.freeze_startup_snapshot else None
    built = build_turns(branch.rows, classifier.table, classifier.speech)
    turns = built.turns
    open_tail = bool(turns) and turns[-1].is_open
    dropped_tail_items = 0
    carried = turns
    if open_tail and not config.include_open_tail:
        dropped_tail_items = turns[-1].item_count
        carried = turns[:-1]
    snapshot_tokens = estimate_tokens(snapshot.text, config.token_divisor) if snapshot else 0
    budget = apply_budget(carried, snapshot_tokens, config.carry_max_tokens,
                          config.carry_overflow, config.token_divisor)
    window = list(turns[-config.poison_window_turns:].items())
    rules = speech_rules(config)
    poison = poison_score(read_texts(path, window, rules, classifier.answer_ids),
                          config.poison_regex)

    by_origin, conversation_bytes, longest = turns.source.summary()
    reasons = _input_reasons(config, stats, classifier.impossible_lines, branch)
    reasons += _carry_reasons(config, len(turns), poison, budget, longest)
    dirty = dirty_report(scanned.tally, conversation_bytes, config.dirty_budget_bytes,
                         classifier.viewed_original_image, config.rebuild_on_original_image_view)
    facts = {  # the fields of `plan_report.PlanReport`, in its order
        "source_path": str(path),
        "source_sha256": scanned.sha256,
        "source_bytes": stats.bytes_read,
        "source_session_id": _session_id(path, classifier.session_ids),
        "claude_code_version": classifier.version,
        "source_turns": len(turns),
        "selected_turns": len(budget.selected),
        "open_tail_turns": int(open_tail),
        "open_tail_carried": open_tail and config.include_open_tail,
        "dropped_oldest_turns": budget.dropped_oldest_turns,
        "dropped_open_tail_items": dropped_tail_items,
        "source_speech_items": sum(by_origin.values()),
        "carried_speech_items": sum(turn.item_count for turn in budget.selected),
        "estimated_tokens": budget.estimated_tokens,
        "overflow_blocked": budget.overflow_blocked,
        "overflow_tokens": budget.overflow_tokens,
        "poison_score": poison,
        "startup_frozen": snapshot is not None,
        "startup_sha256": snapshot.sha256 if snapshot else None,
        "unreadable_lines": list(stats.unreadable_lines),
        "impossible_lines": list(classifier.impossible_lines),
        "torn_final_line": stats.torn_final_line,
        "abandoned_branch_records": branch.abandoned_records,
        "branch_file_order_fallback": branch.file_order_fallback,
        "bridged_missing_parents": branch.bridged_gaps,
        "dropped_leading_assistant_items": built.leading_assistant_items,
        "speech_by_origin": by_origin,
        "blocked_reason": "; ".join(reasons),
        "notes": _notes(config, stats, branch, open_tail),
        "dirty": dirty,
    }
    return Plan(facts, path, snapshot, budget.selected, classifier.model, classifier.cwd,
                rules, frozenset(classifier.answer_ids))


def speech_rules(config: Config | ReadingSettings) -> SpeechRules:
    """Which tools' traffic CONFIG counts as speech."""
    return SpeechRules(tuple(config.speech_tool_pattern), tuple(config.answer_tool_pattern))


def scan_cache_dir(config: Config | ReadingSettings) -> Path | None:
    """Where the config's scans are cached (`state_layout.scan_cache_in`)."""
    return scan_cache_in(config.state_dir)


def _scan(config: ReadingSettings, path: Path, parallel: bool | None,
          started: SecondHalf | None, cache_dir: Path | None) -> Scan:
    """The one pass over PATH; refuses an empty file and one with no JSON record at all."""
    scanned = cached_scan(path, speech_rules(config), cache_dir, parallel=parallel,
                          started=started)
    stats = scanned.stats
    if stats.bytes_read == 0:
        raise InputError(f"transcript {path} is empty")
    parsed_lines = stats.lines - len(stats.unreadable_lines) - int(stats.torn_final_line)
    if stats.unreadable_lines and parsed_lines <= 0:
        raise InputError(
            f"transcript {path} is not a Claude Code transcript: none of its "
            f"{stats.lines} lines is a JSON record"
        )
    return scanned


def _notes(config: ReadingSettings, stats: ReadStats, branch: Branch, open_tail: bool) -> list[str]:
    """What the report tells without blocking: how the branch was found, what was ignored."""
    notes = []
    if branch.file_order_fallback:
        notes.append("no record carries a parentUuid link: conversation taken in file order")
    if branch.bridged_gaps:
        notes.append(f"{branch.bridged_gaps} missing parent(s) bridged by timestamp (<= 5 s)")
    if stats.torn_final_line:
        notes.append("the final line has no newline (a write in progress) and was ignored")
    if open_tail:
        verb = "carried, marked unanswered" if config.include_open_tail else "not carried"
        notes.append(f"the last turn has no reply yet ({verb})")
    return notes


def _input_reasons(config: ReadingSettings, stats: ReadStats, impossible_lines: list[int],
                   branch: Branch) -> list[str]:
    """Why the file cannot be trusted to hold every word: unreadable lines, impossible shapes,
    a looping chain."""
    reasons = []
    if stats.unreadable_lines and config.block_on_unreadable_lines:
        count = len(stats.unreadable_lines)
        reasons.append(f"{count} unreadable line{'s' if count > 1 else ''} "
                       f"(first at line {stats.unreadable_lines[0]}) may hold a user's words")
    if impossible_lines and config.block_on_unreadable_lines:
        reasons.append(_impossible_reason(impossible_lines))
    if branch.cycle_at_line is not None:
        reasons.append(f"the parentUuid chain loops at line {branch.cycle_at_line}")
    return reasons


def _carry_reasons(config: ReadingSettings, turns: int, poison: int, budget: BudgetResult,
                   longest: tuple[int, int]) -> list[str]:
    """Why what would be carried must not be: nothing, poisoned, over budget, an item too long."""
    reasons = []
    if not turns:
        reasons.append("there is no conversation to carry")
    if poison >= config.poison_threshold:
        reasons.append(f"poisoned context: {poison} matches of poison_pattern in the last "
                       f"{config.poison_window_turns} turns")
    if budget.overflow_blocked:
        reasons.append(f"over budget: {budget.estimated_tokens} estimated tokens > "
                       f"carry_max_tokens {config.carry_max_tokens} (carry_overflow = block)")
    if config.max_event_chars and longest[0] > config.max_event_chars:
        reasons.append(f"the speech item at line {longest[1]} has {longest[0]} characters, "
                       f"over max_event_chars {config.max_event_chars}")
    return reasons


def _impossible_reason(lines: list[int], shown: int = 10) -> str:
    listed = ", ".join(map(str, lines[:shown])) + (", ..." if len(lines) > shown else "")
    count = len(lines)
    return (f"{count} user/assistant record{'s' if count > 1 else ''} of a shape Claude Code "
            f"does not write (line{'s' if count > 1 else ''} {listed}) may hold a user's words")


def _session_id(path: Path, seen: set[str]) -> str:
    if _UUID.match(path.stem):
        return path.stem
    return sorted(seen)[0] if len(seen) == 1 else ""
