"""Speech items in branch order, grouped into turns.

Consecutive user messages belong to one turn and an assistant reply closes it; runtime records
between messages never break a turn; assistant words before the first user message are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .records import Origin, Role, RowSpeech


class Item(NamedTuple):
    """One speech item of the plan. Its words are not held: `texts.read_texts` reads them from
    the source line at OFFSET (item SLOT of that record) and checks them against SHA256.
    (A named tuple: a large session has tens of thousands, made in one loop.)"""

    role: Role
    origin: Origin
    source_uuid: str
    source_line: int
    source_timestamp: str | None
    sha256: str
    utf8_bytes: int
    chars: int
    cjk: int
    offset: int
    length: int
    slot: int


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


def build_turns(rows: Sequence[int], speech: Mapping[int, RowSpeech],
                lines: Sequence[int]) -> Turns:
    turns: list[Turn] = []
    leading = 0
    make = Item._make  # skips the keyword handling of Item(...): tens of thousands of calls
    for row in rows:
        found = speech.get(row)
        if found is None:
            continue
        for index, said in enumerate(found.items):
            item = make((said.role, said.origin, found.uuid, lines[row], found.timestamp,
                         said.sha256, said.utf8_bytes, said.chars, said.cjk, found.offset,
                         found.length, index))
            if said.role is Role.user:
                if not turns or turns[-1].assistant:
                    turns.append(Turn())
                turns[-1].user.append(item)
            elif turns:
                turns[-1].assistant.append(item)
            else:
                leading += 1
    return Turns(turns, leading)
