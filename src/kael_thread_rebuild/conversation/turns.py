"""Speech items in branch order, grouped into turns.

Consecutive user messages belong to one turn and an assistant reply closes it; runtime records
between messages never break a turn; assistant words before the first user message are dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .records import Origin, RecordFacts, Role


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


def build_turns(records: list[RecordFacts]) -> Turns:
    turns: list[Turn] = []
    leading = 0
    for record in records:
        for speech in record.speech:
            item = Item(speech.role, speech.text, speech.origin, record.uuid or "",
                        record.line, record.timestamp)
            if speech.role is Role.user:
                if not turns or turns[-1].assistant:
                    turns.append(Turn())
                turns[-1].user.append(item)
            elif turns:
                turns[-1].assistant.append(item)
            else:
                leading += 1
    return Turns(turns, leading)
