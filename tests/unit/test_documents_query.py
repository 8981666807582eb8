"""The wire filter language: every operator, its aliases, and clear errors for the rest."""

from __future__ import annotations

import datetime as dt

import pytest

from tuffdb.documents.query import compile_node, parse, where
from tuffdb.documents.shape import parse_sort, project, sort_records
from tuffdb.errors import ProtocolError

REC = {"id": "r1", "name": "Ada Lovelace", "age": 36, "tags": ["math", "poet"],
       "born": dt.datetime(1815, 12, 10, tzinfo=dt.UTC), "addr": {"city": "London"}, "nil": None}  # fmt: skip


def cond(field: str, op: str, value: object) -> dict[str, object]:
    return {"type": "Condition", "content": {"field": field, "operator": op, "value": value}}


def matches(spec: object) -> bool:
    return compile_node(parse(spec))(REC)


@pytest.mark.parametrize(("op", "value", "expected"), [
    ("Eq", 36, True), ("Equal", 36.0, True), ("Equals", "36", True), ("Eq", "x", False),
    ("Ne", 35, True), ("NotEqual", 36, False), ("NotEquals", 1, True),
    ("Gt", 35, True), ("GreaterThan", 36, False), ("Gte", 36, True),
    ("GreaterThanOrEqual", 37, False), ("Lt", 40, True), ("LessThan", 36, False),
    ("Lte", 36, True), ("LessThanOrEqual", 1, False), ("In", [1, 36], True),
    ("NotIn", [1, 36], False), ("Gt", "1", True), ("Gt", "a", False),
])  # fmt: skip
def test_comparison_operators_and_aliases(op: str, value: object, expected: bool) -> None:
    assert matches(cond("age", op, value)) is expected


def test_string_and_array_operators_are_case_sensitive() -> None:
    assert matches(cond("name", "Contains", "Love"))
    assert not matches(cond("name", "Contains", "love"))
    assert matches(cond("name", "StartsWith", "Ada")) and matches(cond("name", "EndsWith", "lace"))
    assert matches(cond("tags", "Contains", "poet")) and not matches(cond("tags", "Contains", "po"))


def test_exists_nested_paths_and_missing_fields() -> None:
    assert matches(cond("nil", "Exists", True)) and matches(cond("zzz", "Exists", False))
    assert matches(cond("addr.city", "Eq", "London"))
    assert matches(cond("zzz", "Eq", None)) and not matches(cond("zzz", "Gt", 0))


def test_rfc3339_strings_match_datetime_fields() -> None:
    assert matches(cond("born", "Lt", "1900-01-01T00:00:00Z"))
    assert matches(cond("born", "Eq", "1815-12-10T00:00:00Z"))


def test_logical_and_or_not_nest() -> None:
    spec = {"type": "Logical", "content": {"operator": "And", "expressions": [
        cond("age", "Gt", 30),
        {"type": "Logical", "content": {"operator": "Or", "expressions": [cond("x", "Eq", 1), cond("age", "Eq", 36)]}},  # noqa: E501
        {"type": "Logical", "content": {"operator": "Not", "expressions": [cond("age", "Eq", 1)]}},
    ]}}  # fmt: skip
    assert matches(spec)
    assert matches((where("age") > 30) & ~(where("name") == "x") | (where("age") == 0))


@pytest.mark.parametrize("bad", [
    cond("age", "Regex", ".*"), {"type": "Sql", "content": {}}, cond("", "Eq", 1),
    {"type": "Logical", "content": {"operator": "Xor", "expressions": []}},
    {"type": "Logical", "content": {"operator": "Not", "expressions": [cond("a", "Eq", 1), cond("b", "Eq", 2)]}},  # noqa: E501
    cond("age", "In", 5), "age > 5",
])  # fmt: skip
def test_malformed_filters_raise_protocol_error(bad: object) -> None:
    with pytest.raises(ProtocolError):
        parse(bad)


def test_older_expression_form_is_accepted() -> None:
    assert matches({"type": "expression", "content": {"field": "age", "operator": "eq", "value": 36}})


def test_sort_is_stable_multi_key_with_missing_first() -> None:
    rs = [{"id": "1", "a": 2, "b": 1}, {"id": "2", "a": 1}, {"id": "3", "a": 2, "b": 0}, {"id": "4"}]
    got = sort_records(rs, parse_sort([{"field": "a", "ascending": False}, {"field": "b", "ascending": True}]))  # noqa: E501
    assert [r["id"] for r in got] == ["3", "1", "2", "4"]
    assert parse_sort({"field": "a", "ascending": True}) == [("a", True)]
    with pytest.raises(ProtocolError):
        parse_sort([{"field": "a", "ascending": "yes"}])


def test_projection_keeps_id_and_empty_lists_mean_none() -> None:
    assert project(REC, ["name"], None) == {"id": "r1", "name": "Ada Lovelace"}
    assert project(REC, [], []) == REC
    assert "addr" not in project(REC, None, ["addr"]) and project(REC, ["addr.city"], None)["addr"] == {"city": "London"}  # noqa: E501


def test_range_operators_never_match_null() -> None:
    """Found by property testing: ``Gte null`` matched a missing field in a full scan but not
    through an ordered index; ranges now never match null on either side."""
    for op in ("Gt", "Gte", "Lt", "Lte"):
        assert not matches(cond("zzz", op, None)) and not matches(cond("nil", op, None))
        assert not matches(cond("nil", op, 1))
