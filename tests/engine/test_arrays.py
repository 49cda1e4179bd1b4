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
from kael_thread_rebuild.conversation.table import Kind, RecordTable


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
