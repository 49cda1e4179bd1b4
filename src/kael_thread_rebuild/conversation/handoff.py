"""The end of the forked reader's range taken over by the parent when the parent is done first.

The split of a file between the two readers is fixed before either starts, but how fast each
goes is not: the parent also digests the file and starts later (its imports), and a shared
machine slows either at random. So the parent takes the smaller part, and when it is done it
asks the child for the rest: the child, which looks for a request about every megabyte it
reads (`reader.Handoff`), answers with a line start about halfway through what it has left,
stops there, and the parent reads from there to where its last part began (the first time, the
end). Done with that, it asks again, until the child answers no: a parent that went faster
than the child takes more, so the two end closer together. Two pipes, no shared memory: a
request is one byte from the parent, an answer eight from the child (0: no, too little is left;
it is asked no more). A child that has finished reading closes its ends, so that a parent
asking then hears no and goes on to collect what the child read.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from ..transcript.reader import next_line_start

# Less than this left to read is not worth a second reader (a classifier more to absorb).
LEAST_HANDED_OVER = 2 << 20
_ANSWER = 8


@dataclass(slots=True)
class Pipes:
    """Both ends of the request pipe (parent to child) and of the answer pipe (back)."""

    request_read: int
    request_write: int
    answer_read: int
    answer_write: int

    @classmethod
    def open(cls) -> Pipes:
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        os.set_blocking(request_read, False)
        return cls(request_read, request_write, answer_read, answer_write)

    def parent_side(self) -> tuple[int, int]:
        """In the parent after the fork: its ends (request write, answer read)."""
        os.close(self.request_read)
        os.close(self.answer_write)
        return self.request_write, self.answer_read

    def child_side(self) -> tuple[int, int]:
        """In the child after the fork: its ends (request read, answer write)."""
        os.close(self.request_write)
        os.close(self.answer_read)
        return self.request_read, self.answer_write


class ChildHandoff:
    """The child's side: a `reader.Handoff` that answers each of the parent's requests."""

    def __init__(self, fd: int, requests: int, answers: int) -> None:
        self.fd = fd
        self.requests: int | None = requests
        self.answers = answers

    def end_at(self, next_line: int, end: int) -> int:
        if self.requests is None:
            return end
        try:
            asked = os.read(self.requests, 1)
        except BlockingIOError:
            return end
        cut = self._cut(next_line, end) if asked else None
        with contextlib.suppress(OSError):  # a parent gone: the child is killed anyway
            os.write(self.answers, (cut or 0).to_bytes(_ANSWER, "little"))
        if cut is None:
            self.close()
        return cut or end

    def _cut(self, next_line: int, end: int) -> int | None:
        """The first line start at or past the middle of [NEXT_LINE, END), if the part after
        it is worth handing over."""
        middle = next_line + (end - next_line) // 2
        cut = next_line_start(self.fd, middle - 1, end)  # a newline before it: the middle
        return cut if cut is not None and cut < end and end - cut >= LEAST_HANDED_OVER else None

    def close(self) -> None:
        """Answer no more (the parent's request, if any, then reads an end of file)."""
        if self.requests is not None:
            os.close(self.requests)
            os.close(self.answers)
            self.requests = None


def ask_for_rest(requests: int, answers: int) -> int | None:
    """The parent's side: where the parent now reads on from (to where the part it was handed
    last begins; the first time, to the file's end as of the scan), or None when the child
    keeps all that it has left."""
    try:
        os.write(requests, b"?")
    except OSError:  # the child is gone: collecting it says why
        return None
    answer = b""
    while len(answer) < _ANSWER:
        more = os.read(answers, _ANSWER - len(answer))
        if not more:
            return None
        answer += more
    return int.from_bytes(answer, "little") or None
