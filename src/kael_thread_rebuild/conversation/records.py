"""What one transcript record means: its links, the speech it holds, and the runtime bytes it adds.

Every chain record becomes one row of a RecordTable (plus its speech, when it has any); the raw
record is dropped right after, so memory does not grow with tool-result size. Unknown record
types and fields are tolerated.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import hashlib
import json
import math
import re
import time
from array import array
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from ..claude_code.record_shapes import (
    COMPACT_BOUNDARY,
    IMAGE_BLOCK,
    QUEUED_COMMAND,
    QUEUED_PROMPT,
    REGENERATED_ATTACHMENTS,
    SPOKEN_SYSTEM_SUBTYPES,
    SYNTHETIC_MODEL,
    TEXT_BLOCK,
    THINKING_BLOCKS,
    TOOL_RESULT_BLOCK,
    TOOL_USE_BLOCK,
    impossible_shape,
    is_speech_type,
    user_text,
)
from ..defaults import ANSWER_MARK, DEFAULT_ANSWER_TOOLS, DEFAULT_SPEECH_TOOLS
from ..transcript.reader import text_bytes
from ..transcript.skeleton import BigText, json_size, materialize
from .arrays import NARROW, IdentityArray, append_wide, extend_wide, narrow
from .injected import (
    is_channel_message,
    is_interrupted_marker,
    strip_injected,
    strip_injected_content,
)
from .measured import settle
from .table import BOUNDARY, KINDS, SIDECHAIN, TOOL_RESULT, Kind, RecordTable
from .tokens import count_cjk

# Marker field our own candidate records carry, so that a candidate read again means the same.
MARKER = "kaelRebuild"
# Key of the first candidate record's marker: the session it was rebuilt from (the advisor's hook
# follows it to find the conversation a lineage started from).
SOURCE_SESSION = "sourceSessionId"


class Role(StrEnum):
    user = "user"
    assistant = "assistant"


class Origin(StrEnum):
    terminal = "terminal"
    channel = "channel"
    queued = "queued"
    assistant = "assistant"
    speech_tool = "speech_tool"
    compact_summary = "compact_summary"
    advisor_answer = "advisor_answer"


class Dirt(StrEnum):
    tool_result = "tool_result"
    tool_use = "tool_use"
    thinking = "thinking"
    image = "image"
    meta_injection = "meta_injection"
    attachment = "attachment"
    injected_block = "injected_block"
    sidechain = "sidechain"
    system = "system"
    bookkeeping = "bookkeeping"


@dataclass(slots=True, frozen=True)
class Speech:
    role: Role
    text: str
    origin: Origin


ROLES = tuple(Role)
ORIGINS = tuple(Origin)
_ROLE_INDEX = {role: index for index, role in enumerate(ROLES)}
_ORIGIN_INDEX = {origin: index for index, origin in enumerate(ORIGINS)}
DIGEST_BYTES = 8
USER_ROLE = _ROLE_INDEX[Role.user]
NO_TIME, CANONICAL_TIME, OTHER_TIME = 0, 1, 2
HOUR_SECONDS = 3600


def words_match(sha256: str, digest: str) -> bool:
    """Whether words whose SHA-256 is SHA256 (hex) are those a `SpeechStore` digest was taken
    of."""
    return sha256.startswith(digest)


def canonical_time(epoch_ms: float) -> str | None:
    """EPOCH_MS written as Claude Code writes a record's timestamp (UTC, milliseconds, `Z`)."""
    if math.isnan(epoch_ms):
        return None
    seconds, millis = divmod(round(epoch_ms), 1000)
    hour, second = divmod(seconds, HOUR_SECONDS)
    try:
        prefix = _utc_hour(hour)
    except (OverflowError, OSError, ValueError):
        return None
    minutes, second = divmod(second, 60)
    return f"{prefix}{minutes:02d}:{second:02d}.{millis:03d}Z"


@functools.lru_cache(maxsize=64)
def _utc_hour(hour: int) -> str:
    """The date and hour (UTC) of HOUR hours after the epoch, as `canonical_time` writes them:
    a session's records come hours apart at most, so `time.strftime` runs once an hour, not
    once a record."""
    return time.strftime("%Y-%m-%dT%H:", time.gmtime(hour * HOUR_SECONDS))


@dataclass(slots=True)
class SpeechStore:
    """The speech of every record, without its words, in flat arrays (a million messages must
    not cost a million Python objects). The words stay in the file and are read again (and
    checked against the digest) only when a candidate is written.

    Per record that speaks (file order): its table row (free while every record speaks, as in
    a chat), line offset and size (free while each such line ends where the next begins, as in
    a chat), its timestamp, and
    where its items start (most records say one thing: item i is record i's until one says
    more). Per item: role and origin (one byte), the first DIGEST_BYTES of the SHA-256 of its
    words (enough to tell that the file changed; the full digest is taken again from the words
    read back), UTF-8 bytes, characters and CJK characters (characters are free while every
    item is ASCII, CJK characters while none has one). Sizes and counts take two bytes each
    until one needs more; offsets four until one passes 4 GiB.
    """

    rows: IdentityArray = field(default_factory=IdentityArray)
    offsets: array[int] = field(default_factory=lambda: array("I"))
    # None while each line ends where the next begins (`length_of`); the last line's size.
    lengths: array[int] | None = None
    last_length: int = 0
    first_items: IdentityArray = field(default_factory=IdentityArray)
    # NO_TIME, or CANONICAL_TIME when the timestamp is the one `canonical_time` writes for the
    # record's time in the table (as Claude Code writes them), or OTHER_TIME: in `other_times`.
    # None while every one is CANONICAL_TIME.
    timed: bytearray | None = None
    other_times: dict[int, str] = field(default_factory=dict)
    kinds: bytearray = field(default_factory=bytearray)
    digests: bytearray = field(default_factory=bytearray)
    utf8_bytes: array[int] = field(default_factory=narrow)
    # None while each item's characters are its UTF-8 bytes (`char_count`).
    chars: array[int] | None = None
    # None while no item has a CJK character (`cjk_count`).
    cjk: array[int] | None = None

    def add(self, row: int, timestamp: str | None, epoch_ms: float, offset: int, length: int,
            speech: tuple[Speech, ...]) -> None:
        owner = len(self.rows)
        self.rows.append(row)
        if self.lengths is not None or not self._follows(offset):
            self.lengths = append_wide(self._real_lengths(), length)
        self.offsets = append_wide(self.offsets, offset)
        self.last_length = length
        self.first_items.append(len(self.kinds))
        if timestamp is not None and timestamp == canonical_time(epoch_ms):
            if self.timed is not None:
                self.timed.append(CANONICAL_TIME)
        elif timestamp is None:
            self._real_timed(owner).append(NO_TIME)
        else:
            self._real_timed(owner).append(OTHER_TIME)
            self.other_times[owner] = timestamp
        for said in speech:
            data = text_bytes(said.text)
            size, chars, cjk = len(data), len(said.text), count_cjk(said.text)
            if self.chars is not None or chars != size:
                self.chars = append_wide(self._real_chars(), chars)
            if self.cjk is not None or cjk:
                self.cjk = append_wide(self._real_cjk(), cjk)
            self.kinds.append(_ROLE_INDEX[said.role] << 4 | _ORIGIN_INDEX[said.origin])
            self.digests += hashlib.sha256(data).digest()[:DIGEST_BYTES]
            self.utf8_bytes = append_wide(self.utf8_bytes, size)

    def _follows(self, offset: int) -> bool:
        """Whether a line at OFFSET begins where the last speaking line so far ends (or is the
        first)."""
        return not self.offsets or offset == self.offsets[-1] + self.last_length

    def length_of(self, owner: int) -> int:
        """The size of speaking record OWNER's line."""
        if self.lengths is not None:
            return self.lengths[owner]
        if owner == len(self.offsets) - 1:
            return self.last_length
        return self.offsets[owner + 1] - self.offsets[owner]

    def _real_lengths(self) -> array[int]:
        """The size of every line so far, as an array (made when one does not end where the
        next begins)."""
        if self.lengths is None:
            offsets = self.offsets
            self.lengths = extend_wide(narrow(), (offsets[i + 1] - offsets[i]
                                                  for i in range(len(offsets) - 1)))
            if offsets:
                self.lengths = append_wide(self.lengths, self.last_length)
        return self.lengths

    def _real_timed(self, owners: int) -> bytearray:
        """How each of the first OWNERS records is timed (made when one is not canonical)."""
        if self.timed is None:
            self.timed = bytearray([CANONICAL_TIME]) * owners
        return self.timed

    def _real_chars(self) -> array[int]:
        """The characters of every item so far, as an array (made when the first is not
        ASCII)."""
        if self.chars is None:
            return array(self.utf8_bytes.typecode, self.utf8_bytes)
        return self.chars

    def _real_cjk(self) -> array[int]:
        if self.cjk is None:
            return array(NARROW, bytes(len(self.utf8_bytes) * array(NARROW).itemsize))
        return self.cjk

    def char_count(self, item: int) -> int:
        return self.utf8_bytes[item] if self.chars is None else self.chars[item]

    def cjk_count(self, item: int) -> int:
        return 0 if self.cjk is None else self.cjk[item]

    def __len__(self) -> int:
        return len(self.rows)

    def owner_of(self, item: int) -> int:
        """The speaking record ITEM belongs to."""
        firsts = self.first_items
        if firsts.values is None:  # one item a record, but the last may have more
            return min(item, len(firsts) - 1)
        return bisect.bisect_right(firsts.values, item) - 1

    def position_of(self, row: int) -> int:
        """How many speaking records come before table row ROW (rows are stored in increasing
        order)."""
        if self.rows.values is None:  # every record so far has spoken
            return max(0, min(row, len(self.rows)))
        return bisect.bisect_left(self.rows.values, row)

    def rows_of(self, origin: Origin) -> list[int]:
        """The table rows of the records holding an item of ORIGIN (a byte search: few hold
        one)."""
        kinds, found = self.kinds, list[int]()
        for role in ROLES:
            code = _ROLE_INDEX[role] << 4 | _ORIGIN_INDEX[origin]
            at = kinds.find(code)
            while at >= 0:
                found.append(self.rows[self.owner_of(at)])
                at = kinds.find(code, at + 1)
        return sorted(set(found))

    def role(self, item: int) -> Role:
        return ROLES[self.kinds[item] >> 4]

    def origin(self, item: int) -> Origin:
        return ORIGINS[self.kinds[item] & 15]

    def digest(self, item: int) -> str:
        """The start of the SHA-256 of ITEM's words, as hex (see `words_match`)."""
        return self.digests[item * DIGEST_BYTES:(item + 1) * DIGEST_BYTES].hex()

    def timestamp(self, index: int, epoch_ms: float) -> str | None:
        """The timestamp of speaking record INDEX, whose time in the table is EPOCH_MS."""
        timed = CANONICAL_TIME if self.timed is None else self.timed[index]
        if timed == CANONICAL_TIME:
            return canonical_time(epoch_ms)
        return self.other_times[index] if timed == OTHER_TIME else None

    def absorb(self, later: SpeechStore, row_offset: int) -> None:
        """Append the store of the byte range read right after this one."""
        owner_offset, item_offset = len(self.rows), len(self.kinds)
        self.rows.extend_shifted(later.rows, row_offset)
        if self.lengths is not None or later.lengths is not None or (
                len(later.offsets) and not self._follows(later.offsets[0])):
            self.lengths = extend_wide(self._real_lengths(), later._real_lengths())
        if len(later.offsets):
            self.last_length = later.last_length
        self.offsets = extend_wide(self.offsets, later.offsets)
        self.first_items.extend_shifted(later.first_items, item_offset)
        if self.timed is not None or later.timed is not None:
            self._real_timed(owner_offset).extend(later._real_timed(len(later.rows)))
        self.other_times.update((owner + owner_offset, timestamp)
                                for owner, timestamp in later.other_times.items())
        self.kinds += later.kinds
        self.digests += later.digests
        if self.chars is not None or later.chars is not None:
            self.chars = extend_wide(self._real_chars(), later._real_chars())
        if self.cjk is not None or later.cjk is not None:
            self.cjk = extend_wide(self._real_cjk(), later._real_cjk())
        self.utf8_bytes = extend_wide(self.utf8_bytes, later.utf8_bytes)


class SnapshotPart(NamedTuple):
    """Start-up context found in one record of the first turn. A named tuple, not a frozen
    dataclass: compiled (setup.py), unpickling a frozen dataclass sets its fields one by one,
    which the dataclass refuses."""

    uuid: str
    timestamp: str | None
    text: str


@dataclass(slots=True)
class _Facts:
    """What classifying one record found, before it is stored in the table."""

    flags: int = 0
    speech: tuple[Speech, ...] = ()
    snapshot_text: str | None = None
    marker_kind: str | None = None
    message_id: str | None = None
    # The record's own-candidate marker (MARKER), when it has one with a kind.
    marker: dict[str, Any] | None = None


@dataclass(slots=True, frozen=True)
class SpeechRules:
    """Which tools' traffic is speech: SPEECH_TOOLS' `text` argument (the assistant speaking
    over a channel) and ANSWER_TOOLS' finished answers (the advisor's, said to the assistant in
    its turn). Globs of tool names (`speech_tool_pattern`, `answer_tool_pattern`)."""

    speech_tools: tuple[str, ...] = DEFAULT_SPEECH_TOOLS
    answer_tools: tuple[str, ...] = DEFAULT_ANSWER_TOOLS

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The rules as plain tuples (what a scan cache entry is keyed by)."""
        return self.speech_tools, self.answer_tools


class SpeechToolMatcher:
    """Tool names (globs) whose traffic is speech: see `SpeechRules`."""

    # Every argument of this class and of Classifier has a default: compiled (setup.py), their
    # `__new__` runs `__init__`, and so does unpickling them, before their state is set.
    def __init__(self, patterns: Iterable[str] = ()) -> None:
        joined = "|".join(fnmatch.translate(pattern) for pattern in patterns)
        self._regex = re.compile(joined) if joined else None

    def __call__(self, name: str) -> bool:
        return bool(self._regex and self._regex.match(name))

    def __bool__(self) -> bool:
        """Whether any name matches at all."""
        return self._regex is not None


def payload_size(value: Any) -> int:
    """UTF-8 bytes of a text, or of a structure's JSON form."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(text_bytes(value))  # isascii() is O(1)
    if value is None:
        return 0
    if type(value) is BigText:
        return value.utf8_bytes
    return json_size(value)


# The members read for every record, looked up once (on Python 3.11 reading an enum member off
# its class costs as much as several dict lookups).
_OTHER, _USER, _ASSISTANT, _ATTACHMENT, _SYSTEM = (Kind.other, Kind.user, Kind.assistant,
                                                 Kind.attachment, Kind.system)
_BOOKKEEPING = Dirt.bookkeeping


# What an unpickled Classifier is made with before its state is set (see SpeechToolMatcher).
_NO_SPEECH_TOOLS = SpeechRules((), ())


def _add(tally: MutableMapping[str, int], category: Dirt, size: int) -> None:
    if size:
        tally[category] = tally.get(category, 0) + size


class Classifier:
    """Reads raw records into a RecordTable plus the speech and snapshot text they hold, and
    adds their runtime bytes to a tally."""

    def __init__(self, rules: SpeechRules = _NO_SPEECH_TOOLS, *, answer_ids: Iterable[str] = (),
                 from_start: bool = True) -> None:
        self.speech_tools = SpeechToolMatcher(rules.speech_tools)
        self.answer_tools = SpeechToolMatcher(rules.answer_tools)
        # The ids of the answer tools' calls seen so far (one a poll: few). A tool result does
        # not name its tool: it names its call's id.
        self.answer_ids: set[str] = set(answer_ids)
        # FROM_START false: this reads a later part of the file, so a result whose call it did
        # not see may answer a call in the part before; one that looks like a finished answer is
        # taken as one and noted here, for `absorb` to confirm. (Remembering every call instead
        # would cost memory in proportion to the file; a misread costs a second read, and only
        # when a tool the rule does not name answers like the advisor.)
        self.from_start = from_start
        self.assumed_answers: set[str] = set()
        # Set by `absorb` when an assumed answer was not one: the scan reads the file again.
        self.misread_answers = False
        self.table = RecordTable()
        self.speech = SpeechStore()
        self.snapshot_texts: dict[int, SnapshotPart] = {}
        self.markers: dict[int, str] = {}
        self.seen_assistant = False
        self.viewed_original_image = False
        self.model: str | None = None
        self.version: str | None = None
        self.cwd: str | None = None
        self.session_ids: set[str] = set()
        # Lines of user/assistant records whose shape Claude Code cannot have written.
        self.impossible_lines: list[int] = []

    def settle(self, record: dict[str, Any]) -> None:
        """Decode the long strings of RECORD it reads as text (`read_records`' SETTLE)."""
        settle(record, self.speech_tools)

    def classify(self, line: int, record: dict[str, Any], size: int, offset: int,
                 tally: MutableMapping[str, int]) -> None:
        uuid, kind_name = record.get("uuid"), record.get("type")
        if is_speech_type(kind_name) and impossible_shape(record) is not None:
            self.impossible_lines.append(line)
        if not isinstance(uuid, str) or not isinstance(kind_name, str):
            _add(tally, _BOOKKEEPING, size)  # most of a transcript's records: nothing more
            return
        kind, facts = self._examine(record, kind_name, size, tally)
        timestamp = record.get("timestamp")
        row = self.table.add(uuid, kind, facts.flags, record.get("parentUuid"), timestamp,
                             line, facts.message_id)
        if facts.flags & BOUNDARY:
            logical = record.get("logicalParentUuid")
            if isinstance(logical, str):
                self.table.logical_parents[row] = logical
        if facts.speech:
            self.speech.add(row, _str_or_none(timestamp), self.table.times[row], offset, size,
                            facts.speech)
        if facts.marker_kind is not None:
            self.markers[row] = facts.marker_kind
        if facts.snapshot_text and not self.seen_assistant:
            self.snapshot_texts[row] = SnapshotPart(uuid, _str_or_none(timestamp),
                                                    facts.snapshot_text)
        if kind is _ASSISTANT:
            self.seen_assistant = True

    def classify_all(self, records: Iterable[tuple[int, dict[str, Any], int, int]],
                     tally: MutableMapping[str, int], *, lines_before: int = 0) -> None:
        """`classify` every (line, record, size, offset) of RECORDS (`read_records` yields
        them), its line numbers counted after LINES_BEFORE lines (here, compiled, the loop
        costs no interpreter step per record)."""
        for line, record, size, offset in records:
            self.classify(line + lines_before, record, size, offset, tally)

    def speech_of(self, record: dict[str, Any]) -> tuple[Speech, ...]:
        """The speech of one record, words included (for a record read again by offset)."""
        kind_name = record.get("type")
        if not isinstance(record.get("uuid"), str) or not isinstance(kind_name, str):
            return ()
        return self._examine(record, kind_name, 0, {})[1].speech

    def _examine(self, record: dict[str, Any], kind_name: str, size: int,
                 tally: MutableMapping[str, int]) -> tuple[Kind, _Facts]:
        """What a chain record (one with a uuid and a type, KIND_NAME) means."""
        kind = KINDS.get(kind_name, _OTHER)
        facts = self._facts(record)
        message = record.get("message")
        if kind is _USER and isinstance(message, dict):
            self._remember_envelope(record)
            self._user(record, message, facts, tally)
        elif kind is _ASSISTANT and isinstance(message, dict):
            self._remember_envelope(record)
            self._assistant(record, message, facts, tally)
        elif kind is _ATTACHMENT:
            self._attachment(record, facts, tally)
        elif kind is _SYSTEM:
            _system(record, facts, size, tally)
        else:
            _add(tally, _BOOKKEEPING, size)
        return kind, facts

    def _facts(self, record: dict[str, Any]) -> _Facts:
        """The facts every record kind has: sidechain, our own marker; notes its session."""
        sidechain = record.get("isSidechain") is True
        facts = _Facts(flags=SIDECHAIN if sidechain else 0)
        marker = record.get(MARKER)
        if isinstance(marker, dict):
            facts.marker_kind = _str_or_none(marker.get("kind"))
            if facts.marker_kind is not None:
                facts.marker = marker
        if not sidechain:
            session = record.get("sessionId")
            if isinstance(session, str):
                self.session_ids.add(session)
        return facts

    def absorb(self, later: Classifier, line_offset: int) -> None:
        """Take in what another classifier read from the byte range right after this one."""
        offset = self.table.absorb(later.table, line_offset)
        self.speech.absorb(later.speech, offset)
        self.markers.update((row + offset, kind) for row, kind in later.markers.items())
        if not self.seen_assistant:
            self.snapshot_texts.update((row + offset, part)
                                       for row, part in later.snapshot_texts.items())
        self.seen_assistant = self.seen_assistant or later.seen_assistant
        self.viewed_original_image = self.viewed_original_image or later.viewed_original_image
        self.model = later.model or self.model
        self.version = later.version or self.version
        self.cwd = later.cwd or self.cwd
        self.session_ids |= later.session_ids
        self.impossible_lines.extend(line + line_offset for line in later.impossible_lines)
        self.misread_answers = self.misread_answers or later.misread_answers or bool(
            later.assumed_answers - self.answer_ids)
        self.answer_ids |= later.answer_ids

    def _remember_envelope(self, record: dict[str, Any]) -> None:
        version = record.get("version")
        if isinstance(version, str):
            self.version = version
        cwd = record.get("cwd")
        if isinstance(cwd, str):
            self.cwd = cwd

    def _user(self, record: dict[str, Any], message: dict[str, Any], facts: _Facts,
              tally: MutableMapping[str, int]) -> None:
        content = message.get("content")
        if isinstance(content, list) and self._tool_results(content, facts, tally):
            return
        text = user_text(content)
        if facts.flags & SIDECHAIN:
            _add(tally, Dirt.sidechain, payload_size(text))
        elif facts.marker is not None:
            self._own_record(text, facts, facts.marker)
        elif record.get("isCompactSummary") is True:
            facts.speech = (Speech(Role.user, text, Origin.compact_summary),)
        else:
            _typed(record, content, text, facts, tally)

    def _tool_results(self, content: list[Any], facts: _Facts,
                      tally: MutableMapping[str, int]) -> bool:
        """Tally a user message's images and tool results; whether it was tool results."""
        results = [b for b in content if isinstance(b, dict) and b.get("type") == TOOL_RESULT_BLOCK]
        for block in content:
            if isinstance(block, dict) and block.get("type") == IMAGE_BLOCK:
                _add(tally, Dirt.image, payload_size(block.get("source")))
        if not results:
            return False
        facts.flags |= TOOL_RESULT
        answers: list[Speech] = []
        for block in results:
            answer = None if facts.flags & SIDECHAIN else self._answer(block)
            if answer is None:
                self._tool_result(block, tally)
            else:
                answers.append(Speech(Role.assistant, answer, Origin.advisor_answer))
        facts.speech = tuple(answers)
        return True

    def _answer(self, block: dict[str, Any]) -> str | None:
        """The finished answer an answer tool's result BLOCK holds, or None (see
        docs/candidate-format.md, "What is speech")."""
        call = block.get("tool_use_id")
        if not isinstance(call, str) or block.get("is_error") is True:
            return None
        known = call in self.answer_ids
        if not known and (self.from_start or not self.answer_tools):
            return None
        content = block.get("content")
        if not known and not _may_answer(content):
            return None  # most results: not decoded nor parsed only to be ruled out
        answer = answer_text(materialize(content))
        if answer is not None and not known:
            self.assumed_answers.add(call)
        return answer

    def _own_record(self, text: str, facts: _Facts, marker: dict[str, Any]) -> None:
        kind = facts.marker_kind
        if kind == "startup_snapshot":
            facts.snapshot_text = unwrap_snapshot(text)
            return
        prefix = marker.get("stampPrefix")
        if isinstance(prefix, str) and text.startswith(prefix):
            text = text[len(prefix):]
        origin = _marker_origin(marker, Origin.terminal)
        if kind in ("speech", "compact_summary"):
            facts.speech = (Speech(Role.user, text, origin),)

    def _tool_result(self, block: dict[str, Any], tally: MutableMapping[str, int]) -> None:
        inner = block.get("content")
        if isinstance(inner, list):
            for item in inner:
                if isinstance(item, dict) and item.get("type") == IMAGE_BLOCK:
                    self.viewed_original_image = True
                    _add(tally, Dirt.image, payload_size(item.get("source")))
                elif isinstance(item, dict):
                    _add(tally, Dirt.tool_result, payload_size(item.get("text")))
        else:
            _add(tally, Dirt.tool_result, payload_size(inner))

    def _assistant(self, record: dict[str, Any], message: dict[str, Any], facts: _Facts,
                   tally: MutableMapping[str, int]) -> None:
        facts.message_id = _str_or_none(message.get("id"))
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": TEXT_BLOCK, "text": content}]
        if not isinstance(content, list):
            return
        model = message.get("model")
        sidechain = bool(facts.flags & SIDECHAIN)
        speaks = not (
            sidechain or record.get("isApiErrorMessage") is True or model == SYNTHETIC_MODEL
        )
        if isinstance(model, str) and model != SYNTHETIC_MODEL and not sidechain:
            self.model = model
        speech: list[Speech] = []
        for block in content:
            if isinstance(block, dict):
                said = self._assistant_block(block, sidechain, speaks, tally)
                if said is not None:
                    speech.append(said)
        facts.speech = tuple(speech)
        if facts.marker is not None:
            facts.speech = _with_marker_origin(facts.speech, facts.marker)

    def _assistant_block(self, block: dict[str, Any], sidechain: bool, speaks: bool,
                         tally: MutableMapping[str, int]) -> Speech | None:
        """The speech of one assistant content block, or None (its runtime bytes tallied)."""
        block_type = block.get("type")
        if block_type == TEXT_BLOCK:
            text = block.get("text")
            if isinstance(text, str) and sidechain:
                _add(tally, Dirt.sidechain, payload_size(text))
            elif isinstance(text, str) and speaks and text.strip():
                return Speech(Role.assistant, text, Origin.assistant)
        elif block_type == TOOL_USE_BLOCK:
            self._note_answer_call(block, sidechain)
            speech_text = self._speech_tool_text(block)
            if speech_text is not None and speaks:
                return Speech(Role.assistant, speech_text, Origin.speech_tool)
            category = Dirt.sidechain if sidechain else Dirt.tool_use
            size = payload_size(block.get("input")) + payload_size(block.get("name"))
            _add(tally, category, size)
        elif block_type in THINKING_BLOCKS:
            size = payload_size(block.get("thinking")) + payload_size(block.get("signature"))
            _add(tally, Dirt.thinking, size + payload_size(block.get("data")))
        elif block_type == IMAGE_BLOCK:
            self.viewed_original_image = True
            _add(tally, Dirt.image, payload_size(block.get("source")))
        return None

    def _note_answer_call(self, block: dict[str, Any], sidechain: bool) -> None:
        name, call = block.get("name"), block.get("id")
        if not sidechain and isinstance(call, str) and isinstance(name, str) \
                and self.answer_tools(name):
            self.answer_ids.add(call)

    def _speech_tool_text(self, block: dict[str, Any]) -> str | None:
        name = block.get("name")
        arguments = block.get("input")
        if not isinstance(name, str) or not self.speech_tools(name):
            return None
        if not isinstance(arguments, dict):
            return None
        text = arguments.get("text")
        return text if isinstance(text, str) and text.strip() else None

    def _attachment(self, record: dict[str, Any], facts: _Facts,
                    tally: MutableMapping[str, int]) -> None:
        attachment = record.get("attachment")
        kind = attachment.get("type") if isinstance(attachment, dict) else None
        if isinstance(attachment, dict) and kind == QUEUED_COMMAND:
            if not facts.flags & SIDECHAIN:
                facts.speech = _queued_speech(attachment)
            return
        rendered = record.get("rendered")
        if not isinstance(rendered, list) or not rendered:
            return
        text = "\n".join(
            item["content"] for item in rendered
            if isinstance(item, dict) and isinstance(item.get("content"), str)
        )
        _add(tally, Dirt.attachment, payload_size(text))
        if kind not in REGENERATED_ATTACHMENTS and text.strip() and not facts.flags & SIDECHAIN:
            facts.snapshot_text = text


# The mark's ASCII part, which no escaping changes, and how far into a result it must start.
_MARK_WORDS = ANSWER_MARK.encode("ascii", "ignore").strip()
_MARK_WITHIN = 64


def _may_answer(content: Any) -> bool:
    """Whether a tool result's CONTENT may be a finished answer, by the first bytes of its
    first text only (a long one is not decoded for it)."""
    if isinstance(content, list):
        first = content[0] if content and isinstance(content[0], dict) else {}
        content = first.get("text")
    if type(content) is BigText:
        return _MARK_WORDS in content.head(_MARK_WITHIN)
    return isinstance(content, str) and _MARK_WORDS.decode() in content[:_MARK_WITHIN]


def answer_text(content: Any) -> str | None:
    """The words of a tool result's CONTENT when they are a finished answer (they start with
    ANSWER_MARK), else None. Claude Code hands an MCP tool's structured result `{"result":
    text}` on as that JSON: the words are its text."""
    if isinstance(content, list):
        parts = [block.get("text") for block in content if isinstance(block, dict)]
        if not parts or not all(isinstance(part, str) for part in parts):
            return None
        content = "\n".join(str(part) for part in parts)
    if not isinstance(content, str):
        return None
    if content.startswith("{"):
        try:
            structured = json.loads(content)
        except (ValueError, RecursionError):
            return None
        content = structured.get("result") if isinstance(structured, dict) else None
    return content if isinstance(content, str) and content.startswith(ANSWER_MARK) else None


def _typed(record: dict[str, Any], content: Any, text: str, facts: _Facts,
           tally: MutableMapping[str, int]) -> None:
    """A user record typed or sent (not a tool result, not ours, not a summary): its words
    without the injected blocks, and the start-up context those blocks hold."""
    stripped = strip_injected_content(content)
    _add(tally, Dirt.injected_block, stripped.removed_bytes)
    if stripped.blocks and text.lstrip().startswith("<system-reminder"):
        facts.snapshot_text = "\n".join(
            block.rstrip() for block in stripped.blocks if block.startswith("<system-reminder")
        )
    words = stripped.text
    if not words.strip() or is_interrupted_marker(words):
        return
    if is_channel_message(words):
        facts.speech = (Speech(Role.user, words, Origin.channel),)
    elif record.get("isMeta") is True:
        _add(tally, Dirt.meta_injection, payload_size(words))
    else:
        queued = record.get("promptSource") == QUEUED_PROMPT
        facts.speech = (Speech(Role.user, words, Origin.queued if queued else Origin.terminal),)


def _queued_speech(attachment: dict[str, Any]) -> tuple[Speech, ...]:
    """The words of a prompt queued while the model was busy (none for a slash command)."""
    prompt = attachment.get("prompt")
    if not isinstance(prompt, str) or attachment.get("commandMode", "prompt") != "prompt":
        return ()
    words = strip_injected(prompt).text
    if not words.strip():
        return ()
    origin = Origin.channel if is_channel_message(words) else Origin.queued
    return (Speech(Role.user, words, origin),)


def _system(record: dict[str, Any], facts: _Facts, size: int,
            tally: MutableMapping[str, int]) -> None:
    subtype = record.get("subtype")
    if subtype == COMPACT_BOUNDARY:
        facts.flags |= BOUNDARY
    if subtype in SPOKEN_SYSTEM_SUBTYPES:
        _add(tally, Dirt.system, payload_size(record.get("content")))
    else:
        _add(tally, Dirt.bookkeeping, size)


SNAPSHOT_OPEN = '<startup-snapshot captured_at="{captured_at}" sha256="{sha256}">\n'
SNAPSHOT_CLOSE = "\n</startup-snapshot>"


def wrap_snapshot(text: str, captured_at: str, sha256: str) -> str:
    return SNAPSHOT_OPEN.format(captured_at=captured_at, sha256=sha256) + text + SNAPSHOT_CLOSE


def unwrap_snapshot(text: str) -> str:
    if text.startswith("<startup-snapshot ") and text.endswith(SNAPSHOT_CLOSE):
        start = text.find(">\n")
        if start != -1:
            return text[start + 2 : -len(SNAPSHOT_CLOSE)]
    return text


def _marker_origin(marker: dict[str, Any], default: Origin) -> Origin:
    name = marker.get("origin")
    return Origin(name) if isinstance(name, str) and name in Origin.__members__ else default


def _with_marker_origin(speech: tuple[Speech, ...], marker: dict[str, Any]) -> tuple[Speech, ...]:
    return tuple(Speech(item.role, item.text, _marker_origin(marker, item.origin))
                 for item in speech)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
