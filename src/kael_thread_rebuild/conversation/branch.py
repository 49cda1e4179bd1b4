"""The active branch: the records the session itself sees, walked the way Claude Code walks them.

Leaf = the last user/assistant record in file order; walk `parentUuid` back; cross a compaction
boundary through `logicalParentUuid` (or the record just before the boundary, since that uuid is
usually a phantom); bridge a missing parent to the newest earlier record at most 5 s older.
Parallel tool calls branch the graph, so assistant records of an on-branch API message that sit
off the walked path are recovered by `message.id`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from .records import RecordFacts

BRIDGE_MS = 5000
CONVERSATION_KINDS = ("user", "assistant")


@dataclass(slots=True)
class Branch:
    records: list[RecordFacts]
    abandoned_records: int
    file_order_fallback: bool
    bridged_gaps: int
    cycle_at_line: int | None


def _epoch_ms(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


class _Bridge:
    """Finds the newest record at most BRIDGE_MS older than a child, built only when needed."""

    def __init__(self, records: list[RecordFacts]) -> None:
        timed = [(ms, record.line, record) for record in records
                 if (ms := _epoch_ms(record.timestamp)) is not None]
        timed.sort(key=lambda item: (item[0], item[1]))
        self._keys = [(ms, line) for ms, line, _ in timed]
        self._records = [record for _, _, record in timed]

    def find(self, child: RecordFacts, visited: set[int]) -> RecordFacts | None:
        child_ms = _epoch_ms(child.timestamp)
        if child_ms is None:
            return None
        index = bisect.bisect_right(self._keys, (child_ms, float("inf")))
        while index > 0:
            index -= 1
            ms, _ = self._keys[index]
            if child_ms - ms > BRIDGE_MS:
                return None
            candidate = self._records[index]
            if (candidate is not child and id(candidate) not in visited
                    and candidate.sidechain == child.sidechain):
                return candidate
        return None


def active_branch(records: list[RecordFacts]) -> Branch:
    """RECORDS are all uuid-bearing records in file order (later duplicates of a uuid win)."""
    by_uuid: dict[str, RecordFacts] = {}
    for record in records:
        if record.uuid is not None:
            by_uuid[record.uuid] = record
    main = [r for r in records if not r.sidechain and by_uuid.get(r.uuid or "") is r]
    conversation = [r for r in main if r.kind in CONVERSATION_KINDS]
    if not conversation:
        return Branch([], 0, False, 0, None)
    if len(conversation) > 1 and all(r.parent is None for r in conversation):
        return Branch(main, 0, True, 0, None)

    position = {id(record): index for index, record in enumerate(main)}
    bridge: _Bridge | None = None
    visited: set[int] = set()
    path: list[RecordFacts] = []
    bridged = 0
    cycle_at: int | None = None
    current: RecordFacts | None = conversation[-1]
    while current is not None:
        if id(current) in visited:
            cycle_at = current.line
            break
        visited.add(id(current))
        path.append(current)
        parent_id = current.parent
        if current.boundary:
            if current.logical_parent in by_uuid:
                current = by_uuid[current.logical_parent]
            else:
                index = position.get(id(current), 0)
                current = main[index - 1] if index > 0 else None
            continue
        if parent_id is None:
            break
        parent = by_uuid.get(parent_id)
        if parent is None:
            bridge = bridge or _Bridge(main)
            parent = bridge.find(current, visited)
            if parent is not None:
                bridged += 1
        current = parent
    path.reverse()
    ordered = _with_parallel_siblings(path, main, visited)
    return Branch(ordered, _abandoned(main, ordered), False, bridged, cycle_at)


def _with_parallel_siblings(path: list[RecordFacts], main: list[RecordFacts],
                            on_path: set[int]) -> list[RecordFacts]:
    """Add off-path records of on-path API messages; each message's records in file order."""
    message_ids = {r.message_id for r in path if r.message_id is not None}
    groups: dict[str, list[RecordFacts]] = {}
    recovered = False
    for record in main:
        if record.kind == "assistant" and record.message_id in message_ids:
            assert record.message_id is not None
            groups.setdefault(record.message_id, []).append(record)
            recovered = recovered or id(record) not in on_path
    if not recovered:
        return path
    ordered: list[RecordFacts] = []
    for record in path:
        if record.message_id is None or record.kind != "assistant":
            ordered.append(record)
        elif record.message_id in groups:
            ordered.extend(groups.pop(record.message_id))
    return ordered


def _abandoned(main: list[RecordFacts], branch: list[RecordFacts]) -> int:
    """Conversation records left on other branches (rewinds, edits, forks).

    Tool results of parallel calls hang off the branch by design and are not abandoned.
    """
    included = {id(record) for record in branch}
    tool_ids = {tool_id for record in branch for tool_id in record.tool_ids}
    return sum(
        1 for record in main
        if record.kind in CONVERSATION_KINDS and id(record) not in included
        and not (record.is_tool_result and set(record.tool_ids) <= tool_ids)
    )
