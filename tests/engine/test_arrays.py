"""The compact arrays of the plan: narrow until a value needs more, identity until it is not."""

from __future__ import annotations

import math
import pickle
from array import array

import pytest

from kael_thread_rebuild.conversation import interner as interner_module
from kael_thread_rebuild.conversation.arrays import (
    IdentityArray,
    TimeArray,
    append_wide,
    extend_wide,
    narrow,
)
from kael_thread_rebuild.conversation.interner import EMPTY, Interner
from kael_thread_rebuild.conversation.records import Origin, Role, Speech, SpeechStore
from kael_thread_rebuild.conversation.table import NO_PARENT, Kind, RecordTable
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
    assert table.parents is None and table.parent_of(298) == 297  # a chain: nothing kept
    table.add(uuids[298], Kind.assistant, 0, uuids[0], None, 299)  # again, 298 rows back
    assert table.parents is not None and table.parents.typecode == "h"
    table.add(uuids[299], Kind.user, 0, uuids[0], None, 300)  # 299 rows back
    table.add("not-a-uuid", Kind.user, 0, "written-later", None, 301)
    assert table.parents.typecode == "h" and table.parents[1] == 1
    assert table.parent_of(300) == 0 and table.is_root(0) and not table.is_root(300)
    assert table.parent_of(301) is None and table.parent_of(1) == 0


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


def test_turns_take_the_branch_rows_in_their_order_where_it_goes_back() -> None:
    """A branch's rows mostly go up; where they go back (parallel calls regrouped, a compaction
    crossed) the items still come in the branch's order, the assistant's before any user's
    dropped."""
    table, store = RecordTable(), SpeechStore()
    speaking = {1: Role.user, 2: Role.assistant, 4: Role.user, 6: Role.assistant, 7: Role.user}
    for row in range(9):
        table.add(f"r{row}", Kind.user, 0, None, None, row + 1)
        if row in speaking:
            origin = Origin.assistant if speaking[row] is Role.assistant else Origin.terminal
            store.add(row, None, float("nan"), row, 1, (Speech(speaking[row], "w", origin),))
    for rows in ([0, 1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 6, 4, 7], [7, 6, 4, 2, 1],
                 [4, 1, 2, 8, 6, 7], [6, 2, 1, 4, 4], [8, 0, 3]):
        built = build_turns(rows, table, store)
        spoken = [row for row in rows if row in speaking]
        leading = next((n for n, row in enumerate(spoken) if speaking[row] is Role.user),
                       len(spoken))
        placed = [store.rows[store.owner_of(item)] for item in built.turns.source.order]
        assert (placed, built.leading_assistant_items) == (spoken[leading:], leading), rows


def test_the_rows_of_a_message_are_a_chain_of_distances_kept_only_once_one_has_more() -> None:
    table = RecordTable()
    for n, message in enumerate(["m1", None, "m2", "m1", None, "m1"]):
        table.add(f"r{n}", Kind.assistant, 0, None, None, n + 1, message)
    assert [table.message_rows(row) for row in (0, 3, 5)] == [[0, 3, 5]] * 3
    assert table.message_first(5) == 0 and table.shares_message(3)
    assert table.message_rows(2) == [2] and not table.shares_message(2)
    assert table.message_rows(1) == [1] and not table.shares_message(1)  # no message at all
    single = RecordTable()
    for n in range(3):
        single.add(f"s{n}", Kind.assistant, 0, None, None, n + 1, f"other{n}")
    assert single.message_previous is None and single.message_next is None
    single.absorb(table, 3)
    assert single.message_rows(8) == [3, 6, 8] and not single.shares_message(5)
    more = RecordTable()  # a message that goes on in the part read after
    more.add("t0", Kind.assistant, 0, None, None, 1, "m2")
    more.add("t1", Kind.assistant, 0, None, None, 2, "m1")
    more.add("t2", Kind.assistant, 0, None, None, 3, "m2")
    single.absorb(more, 9)
    assert single.message_rows(3) == [3, 6, 8, 10] and single.message_rows(5) == [5, 9, 11]
    assert [single.shares_message(row) for row in range(3)] == [False] * 3


def test_far_rows_of_one_message_widen_the_chain() -> None:
    table = RecordTable()
    table.add("a", Kind.assistant, 0, None, None, 1, "m")
    for n in range(300):
        table.add(f"x{n}", Kind.user, 0, None, None, n + 2)
    table.add("b", Kind.assistant, 0, None, None, 302, "m")
    assert table.message_rows(0) == [0, 301] and table.message_first(301) == 0


def test_times_take_four_bytes_and_come_back_exactly() -> None:
    day = 86_400_000.0
    values = [1.7e12 + n * 61_000.0 for n in range(600)]
    values[3] = float("nan")  # no timestamp
    values[300] = values[299] + 40 * day  # a month away: more than an offset holds
    values[301] = 1.7e12 + 0.25  # not a whole millisecond
    times = TimeArray()
    for value in values:
        times.append(value)
    same = [t == v or (math.isnan(t) and math.isnan(v)) for t, v in zip(times, values, strict=True)]
    assert all(same) and len(times) == 600 and times.exact is None
    assert times.offsets.itemsize == 4 and len(times.others) == 3
    assert math.isnan(times[3]) and times[-1] == values[-1] and times[301] == values[301]
    with pytest.raises(IndexError):
        times[600]
    later = pickle.loads(pickle.dumps(times))
    later.extend(times)
    assert len(later) == 1200 and later[899] == values[299] and later[601] == values[1]


def test_times_of_many_odd_values_are_kept_as_floats() -> None:
    times = TimeArray()
    odd = [1.7e12 + n + 0.5 for n in range(TimeArray.MAX_OTHERS + 10)]
    for value in odd:
        times.append(value)
    assert times.exact is not None and list(times) == odd


def test_an_interner_table_stays_at_most_two_thirds_full() -> None:
    interner = Interner(4)
    codes = [interner.add(n.to_bytes(4, "big")) for n in range(100_000)]
    assert codes == list(range(100_000))
    assert 3 * len(interner) <= 2 * len(interner.slots) < 4.5 * len(interner)
    assert interner.find((99_999).to_bytes(4, "big")) == 99_999
    assert interner.find(b"nope") == EMPTY
    interner.release()
    assert interner.find((5).to_bytes(4, "big")) == 5 and len(interner.slots) > 0


def test_an_interner_takes_in_another_as_adding_its_keys_one_by_one_would() -> None:
    """How the table of a forked reader's half is joined: the codes here of the other's keys,
    the keys both have keeping their code, the table grown once, fixed widths or not."""
    for width, later_keys in ((4, [b"efgh", b"ijkl", b"abcd", b"mnop"]),
                              (4, [b"ijkl", b"mnop"]),  # none in common: appended whole
                              (0, [b"efgh", b"a longer key", b"abcd"])):
        here, one_by_one, later = Interner(width), Interner(width), Interner(width)
        for key in (b"abcd", b"efgh"):
            here.add(key)
            one_by_one.add(key)
        for key in later_keys:
            later.add(key)
        expected = [one_by_one.add(key) for key in later_keys]
        assert list(here.add_all(later)) == expected
        assert [here.key(code) for code in range(len(here))] == \
            [one_by_one.key(code) for code in range(len(one_by_one))]
        assert [here.find(key) for key in later_keys] == expected
    many, more = Interner(4), Interner(4)
    for n in range(30_000):
        more.add(n.to_bytes(4, "big"))
    slots_before = len(many.slots)
    assert list(many.add_all(more)) == list(range(30_000))
    assert 3 * len(many) <= 2 * len(many.slots) and len(many.slots) > slots_before
    assert all(many.find(n.to_bytes(4, "big")) == n for n in range(0, 30_000, 7))
    released = Interner(4)
    released.add(b"abcd")
    released.release()
    assert list(released.add_all(more))[:2] == [1, 2] and released.find(b"abcd") == 0


def test_an_interner_made_for_its_keys_at_once_finds_them_as_one_grown_step_by_step() -> None:
    """A forked scan makes its tables for the records it expects (`RecordTable.reserve`)."""
    keys = [n.to_bytes(4, "big") for n in range(5_000)]
    grown, reserved = Interner(4), Interner(4)
    reserved.reserve(len(keys))
    slots = len(reserved.slots)
    assert [grown.add(key) for key in keys] == [reserved.add(key) for key in keys]
    assert len(reserved.slots) == slots == len(grown.slots)  # no step on the way
    reserved.reserve(10)  # never smaller
    assert len(reserved.slots) == slots and reserved.find(keys[-1]) == len(keys) - 1


def test_an_interner_past_the_codes_its_hash_tags_leave_room_for_goes_on_untagged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Slots hold a tag of the key's hash above the code while the codes fit (2**24 of them;
    here 2**4): the key past that has the table made again without tags, the codes kept."""
    monkeypatch.setattr(interner_module, "TAG_SHIFT", 4)
    keys = [n.to_bytes(4, "big") for n in range(100)]
    interner = Interner(4)
    assert [interner.add(key) for key in keys[:16]] == list(range(16)) and interner.tagged
    assert [interner.add(key) for key in keys] == list(range(100)) and not interner.tagged
    assert [interner.find(key) for key in reversed(keys)] == list(range(99, -1, -1))
    assert interner.find(b"nope") == EMPTY
    copy = pickle.loads(pickle.dumps(interner))
    assert not copy.tagged and copy.find(keys[42]) == 42
    small, more = Interner(4), Interner(4)
    small.add(keys[0])
    for key in keys[1:30]:
        more.add(key)
    assert list(small.add_all(more)) == list(range(1, 30)) and not small.tagged
    assert [small.find(key) for key in keys[:30]] == list(range(30))


def test_speech_lines_that_follow_each_other_keep_no_sizes() -> None:
    def said(word: str) -> tuple[Speech, ...]:
        return (Speech(Role.user, word, Origin.terminal),)

    store = SpeechStore()
    for n, (offset, length) in enumerate([(0, 10), (10, 7), (17, 30)]):
        store.add(n, None, float("nan"), offset, length, said(f"w{n}"))
    assert store.lengths is None and [store.length_of(i) for i in range(3)] == [10, 7, 30]
    later = SpeechStore()
    later.add(0, None, float("nan"), 47, 5, said("x"))
    later.add(1, None, float("nan"), 52, 9, said("y"))
    store.absorb(later, 3)
    assert store.lengths is None and [store.length_of(i) for i in range(5)] == [10, 7, 30, 5, 9]
    store.add(5, None, float("nan"), 100, 4, said("z"))  # a runtime line in between
    assert store.lengths is not None
    assert [store.length_of(i) for i in range(6)] == [10, 7, 30, 5, 9, 4]
    apart = SpeechStore()
    apart.add(0, None, float("nan"), 0, 3, said("a"))
    gapped = SpeechStore()
    gapped.add(0, None, float("nan"), 9, 2, said("b"))
    apart.absorb(gapped, 1)
    assert [apart.length_of(i) for i in range(2)] == [3, 2] and list(apart.offsets) == [0, 9]


def test_a_chat_keeps_no_parents_and_no_times_of_its_speech() -> None:
    table, store = RecordTable(), SpeechStore()
    for row in range(4):
        stamp = f"2026-11-01T08:0{row}:00.000Z"
        table.add(f"c{row}", Kind.user, 0, f"c{row - 1}" if row else None, stamp, row + 1)
        store.add(row, stamp, table.times[row], row * 10, 10,
                  (Speech(Role.user, f"w{row}", Origin.terminal),))
    assert table.parents is None and store.timed is None
    assert [table.parent_row(row) for row in range(4)] == [NO_PARENT, 0, 1, 2]
    assert table.is_root(0) and not table.is_root(3)
    assert store.timestamp(2, table.times[2]) == "2026-11-01T08:02:00.000Z"
    table.add("c4", Kind.user, 0, "c1", "2026-11-01 08:04:00+00:00", 5)  # a fork, another way
    store.add(4, "2026-11-01 08:04:00+00:00", table.times[4], 40, 10,
              (Speech(Role.user, "w4", Origin.terminal),))
    assert table.parents is not None and store.timed is not None
    assert [table.parent_row(row) for row in range(5)] == [NO_PARENT, 0, 1, 2, 1]
    assert [store.timestamp(i, table.times[i]) for i in (3, 4)] == [
        "2026-11-01T08:03:00.000Z", "2026-11-01 08:04:00+00:00"]
