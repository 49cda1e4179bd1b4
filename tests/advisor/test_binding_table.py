"""The binding table: re-read under the lock before every write, so concurrent writers (several
processes) lose no record; a closed binding is archived, never overwritten; a table that is not
JSON or of another version is refused in one line and left as it is."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kael_advisor.errors import TableError
from kael_advisor.places import table_path
from kael_advisor.table import Binding, BindingTable, Table


def _add(project: str, writer: int, count: int) -> None:
    table = BindingTable(Path(project))
    for number in range(count):
        key = f"w{writer}-{number}"

        def add(found: Table, key: str = key) -> None:
            found.bindings[key] = Binding(claude_session=key, name=key)

        table.change(add)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(min_value=1, max_value=6), min_size=2, max_size=4))
def test_concurrent_writers_lose_no_record(tmp_path_factory: pytest.TempPathFactory,
                                           counts: list[int]) -> None:
    project = tmp_path_factory.mktemp("project")
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_add, args=(str(project), writer, count))
               for writer, count in enumerate(counts)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
        assert process.exitcode == 0

    found = BindingTable(project).read()
    assert set(found.bindings) == {f"w{writer}-{number}" for writer, count in enumerate(counts)
                                   for number in range(count)}


def test_a_retired_binding_is_archived_not_overwritten(tmp_path: Path) -> None:
    table = BindingTable(tmp_path)

    def first(found: Table) -> None:
        found.bindings["c1"] = Binding(claude_session="c1", name="one", kimi_session="s1")

    def second(found: Table) -> None:
        found.retire("c1")
        found.bindings["c1"] = Binding(claude_session="c1", name="two")

    table.change(first)
    table.change(second)

    found = table.read()
    assert found.bindings["c1"].name == "two"
    assert [(b.name, b.status, b.kimi_session) for b in found.archived] == [
        ("one", "closed", "s1")]


@pytest.mark.parametrize(("content", "said"), [
    (b"{not json", "is not JSON"),
    (b'{"version": 2, "bindings": {}}', "of another version (2"),
    (b'{"version": 1, "bindings": {"x": {"name": 1}}}', "is invalid at bindings.x"),
])
def test_a_bad_table_is_refused_in_one_line_and_left_as_is(tmp_path: Path, content: bytes,
                                                            said: str) -> None:
    path = table_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    with pytest.raises(TableError) as caught:
        BindingTable(tmp_path).change(lambda found: None)

    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert path.read_bytes() == content


def test_find_by_name_or_id_prefix(tmp_path: Path) -> None:
    found = Table(bindings={"abcdef12-3456": Binding(claude_session="abcdef12-3456",
                                                     name="auth work")})

    assert found.find("auth work")[0] == found.find("abcdef12")[0] == "abcdef12-3456"
    with pytest.raises(TableError, match="no task 'abc'"):
        found.find("abc")
