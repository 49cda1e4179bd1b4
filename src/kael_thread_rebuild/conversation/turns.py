"""Speech items in branch order, grouped into turns.

Consecutive user messages belong to one turn and an assistant reply closes it; runtime records
between messages never break a turn; assistant words before the first user message are dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .records import Origin, Role, RowSpeech


@dataclass(slots=True, frozen=True)
class Item:
    role: Role
    text: str
    origin: Origin
    source_uuid: str
    source_line: int
    source_timestamp: str | None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(slots=True)
class Turn:
    user: list[Item] = field(default_factory=list)
    assistant: list[Item] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return not self.assistant

    @property
    def items(self) -> list[Item]:
        return self.user + self.assistant


@dataclass(slots=True)
class Turns:
    turns: list[Turn]
    leading_assistant_items: int


def build_turns(rows: list[int], speech: Mapping[int, RowSpeech],
                lines: Sequence[int]) -> Turns:
    turns: list[Turn] = []
    leading = 0
    for row in rows:
        found = speech.get(row)
        if found is None:
            continue
        for said in found.items:
            item = Item(said.role, said.text, said.origin, found.uuid, lines[row],
                        found.timestamp)
            if said.role is Role.user:
                if not turns or turns[-1].assistant:
                    turns.append(Turn())
                turns[-1].user.append(item)
            elif turns:
                turns[-1].assistant.append(item)
            else:
                leading += 1
    return Turns(turns, leading)
