"""The compact arrays of the plan: narrow until a value needs more, identity until it is not."""

from __future__ import annotations

import pickle
from array import array

import pytest

from kael_thread_rebuild.conversation.arrays import (
    IdentityArray,
    append_wide,
    extend_wide,
    narrow,
)
from kael_thread_rebuild.conversation.interner import EMPTY, Interner
from kael_thread_rebuild.conversation.records import Origin, Role, Speech, SpeechStore
from kael_thread_rebuild.conversation.table import Kind, RecordTable
from kael_thread_rebuild.conversation.turns import build_turns


def test_counts_widen_when_a_value_does_not_fit_and_keep_every_value() -> None:
    values = narrow()
    for value in (0, 65_535):
        values = append_wide(values, value)
    assert values.typecode == "H"
    values = append_wide(values, 65_536)
    values = extend_wide(values, array("H", [7]))
    assert values.typecode == "q" and list(values) == [0, 65_535, 65_536, 7]
    small = extend_wide(narrow(), array("q", [1, 2]))
    assert small.typecode == "H" and list(small) == [1, 2]
    mixed = extend_wide(array("H", [1]), (x for x in (2, -1)))
    assert mixed.typecode == "q" and list(mixed) == [1, 2, -1]


def test_identity_array_turns_real_at_the_first_value_that_is_not_its_index() -> None:
    rows = IdentityArray()
    for value in range(3):
        rows.append(value)
    assert rows.is_identity() and list(rows) == [0, 1, 2] and rows[2] == 2
    with pytest.raises(IndexError):
        rows[3]
    rows[1] = 1
    assert rows.is_identity()
    rows.append(1)
    assert not rows.is_identity() and list(rows) == [0, 1, 2, 1] and len(rows) == 4
    rows[0] = 5
    assert list(rows) == [5, 1, 2, 1]


def test_a_uuid_written_twice_moves_to_its_later_row() -> None:
    """The row maps start as the identity and stay right when a uuid comes back."""
    table = RecordTable()
    first = "00000000-0000-4000-8000-000000000001"
    second = "00000000-0000-4000-8000-000000000002"
    table.add(first, Kind.user, 0, None, None, 1)
    table.add(second, Kind.assistant, 0, first, None, 2)
    assert table.code_rows.is_identity() and table.row_codes.is_identity()
    table.add(first, Kind.user, 0, second, None, 3)
    assert table.row_of(first) == 2 and table.row_of(second) == 1
    assert table.uuid_of(2) == first and table.current(0) == 2
    assert table.parent_of(2) == 1


def test_fixed_width_keys_keep_no_offsets_until_one_of_another_length() -> None:
    keys = Interner(4)
    assert [keys.add(key) for key in (b"abcd", b"efgh", b"abcd")] == [0, 1, 0]
    assert keys.ends is None and len(keys.blob) == 8
    assert keys.find(b"abc") == EMPTY and keys.find(b"efgh") == 1
    assert keys.add(b"longer key") == 2
    assert keys.ends is not None
    assert [keys.key(code) for code in range(3)] == [b"abcd", b"efgh", b"longer key"]
    assert [keys.find(key) for key in (b"abcd", b"efgh", b"longer key")] == [0, 1, 2]
    copied = pickle.loads(pickle.dumps(keys))
    assert [copied.find(key) for key in (b"abcd", b"efgh", b"longer key", b"x")] == [0, 1, 2,
                                                                                     EMPTY]


def test_parents_are_kept_as_distances_a_byte_each_until_one_is_far() -> None:
    table = RecordTable()
    uuids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(300)]
    table.add(uuids[0], Kind.user, 0, None, None, 1)
    for n in range(1, 299):
        table.add(uuids[n], Kind.assistant, 0, uuids[n - 1], None, n + 1)
    assert table.parents.typecode == "b" and table.parent_of(298) == 297
    table.add(uuids[299], Kind.user, 0, uuids[0], None, 300)  # 299 rows back
    table.add("not-a-uuid", Kind.user, 0, "written-later", None, 301)
    assert table.parents.typecode == "h"
    assert table.parent_of(299) == 0 and table.is_root(0) and not table.is_root(299)
    assert table.parent_of(300) is None and table.parent_of(1) == 0


def test_lines_cost_nothing_while_every_line_is_a_record() -> None:
    table = RecordTable()
    for n in range(3):
        table.add(f"u{n}", Kind.user, 0, None, None, n + 1)
    assert table.lines.is_identity() and list(table.lines) == [1, 2, 3]
    later = RecordTable()
    later.add("v0", Kind.user, 0, None, None, 1)
    table.absorb(later, 3)
    assert table.lines.is_identity() and table.lines[3] == 4
    table.add("u9", Kind.user, 0, None, None, 9)
    assert not table.lines.is_identity() and list(table.lines) == [1, 2, 3, 4, 9]


def test_released_lookups_keep_the_parents_the_walk_asks_for_and_come_back() -> None:
    table = RecordTable()
    table.add("a", Kind.user, 0, None, None, 1)
    table.add("b", Kind.assistant, 0, "c", None, 2)  # a parent written later
    table.add("c", Kind.user, 0, "a", None, 3)
    table.release_lookups()
    assert len(table.uuids.slots) == 0 and len(table.message_ids.slots) == 0
    assert table.parent_of(1) == 2 and table.row_of("c") == 2
    assert table.row_of("a") == 0  # not kept: the table is built again
    table.add("d", Kind.assistant, 0, "b", None, 4)
    assert table.parent_of(3) == 1 and table.row_of("zz") is None


def test_ascii_speech_keeps_no_character_counts() -> None:
    store = SpeechStore()
    store.add(0, None, float("nan"), 0, 10, (Speech(Role.user, "hello", Origin.terminal),))
    assert store.chars is None and store.cjk is None and store.char_count(0) == 5
    said = Speech(Role.assistant, "café 日本", Origin.assistant)
    store.add(1, None, float("nan"), 10, 10, (said,))
    assert store.chars is not None and store.cjk is not None
    assert [store.char_count(i) for i in range(2)] == [5, 7]
    assert [store.cjk_count(i) for i in range(2)] == [0, 2]
    later = SpeechStore()
    later.add(0, None, float("nan"), 0, 4, (Speech(Role.user, "ok", Origin.terminal),))
    store.absorb(later, 2)
    assert [store.char_count(i) for i in range(3)] == [5, 7, 2]
    assert [store.cjk_count(i) for i in range(3)] == [0, 2, 0]


def test_turn_slices_share_the_arrays_and_keep_every_turn() -> None:
    table, store = RecordTable(), SpeechStore()
    roles = [Role.user, Role.assistant, Role.user, Role.user, Role.assistant, Role.user]
    for row, role in enumerate(roles):
        table.add(f"r{row}", Kind(1 + (role is Role.assistant)), 0,
                  f"r{row - 1}" if row else None, None, row + 1)
        origin = Origin.assistant if role is Role.assistant else Origin.terminal
        store.add(row, None, float("nan"), row, 1, (Speech(role, f"w{row}", origin),))
    turns = build_turns(range(len(roles)), table, store).turns
    spans = [(t.start, t.middle, t.end) for t in turns]
    assert spans == [(0, 1, 2), (2, 4, 5), (5, 6, 6)]
    tail = turns[1:]
    assert tail.ends is turns.ends and [(t.start, t.end) for t in tail] == [(2, 5), (5, 6)]
    assert (tail[-1].start, turns[:-1][-1].end, len(turns[-2:])) == (5, 5, 2)
    assert len(turns[5:]) == 0 and turns[-1].is_open


def test_the_rows_of_a_message_are_a_chain_of_distances_kept_only_once_one_has_more() -> None:
    table = RecordTable()
    for n, message in enumerate(["m1", None, "m2", "m1", None, "m1"]):
        table.add(f"r{n}", Kind.assistant, 0, None, None, n + 1, message)
    first, second = table.messages[0], table.messages[2]
    assert table.message_members(first) == [0, 3, 5] and table.message_has_more(first)
    assert table.message_members(second) == [2] and not table.message_has_more(second)
    single = RecordTable()
    for n in range(3):
        single.add(f"s{n}", Kind.assistant, 0, None, None, n + 1, f"other{n}")
    assert single.message_previous is None
    single.absorb(table, 3)
    assert single.message_members(single.messages[3]) == [3, 6, 8]
