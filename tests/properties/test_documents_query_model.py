"""Property tests: the query engine (planner + indexes + KVStore) against brute force.

The reference is a list of dicts and a filter evaluator written independently of
tuffdb.documents.query; the engine runs on a real KVStore with hash and ordered indexes
on some fields. Both must return the same ids in the same order for random documents,
random filters and random sorts; and every index plan must equal a full scan.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuffdb.documents import Database

FIELDS = ("a", "b", "c", "s")
vals = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y", "xy", "yx", ""]), st.none(),
                 st.booleans(), st.floats(-3, 3, allow_nan=False).map(lambda f: round(f, 1)))  # fmt: skip
docs = st.lists(st.dictionaries(st.sampled_from(FIELDS), vals, max_size=4), max_size=25)
OPS = ["Eq", "Ne", "Gt", "Gte", "Lt", "Lte", "In", "NotIn", "Contains", "StartsWith", "EndsWith", "Exists"]  # noqa: E501


def _cond(draw: Any) -> dict[str, Any]:
    op = draw(st.sampled_from(OPS))
    if op in ("In", "NotIn"):
        value = draw(st.lists(vals, max_size=3))
    elif op == "Exists":
        value = draw(st.booleans())
    else:
        value = draw(vals)
    return {"type": "Condition", "content": {"field": draw(st.sampled_from(FIELDS)), "operator": op, "value": value}}  # noqa: E501


@st.composite
def filters(draw: Any, depth: int = 2) -> dict[str, Any] | None:
    if depth == 0 or draw(st.booleans()):
        return _cond(draw)
    op = draw(st.sampled_from(["And", "Or", "Not"]))
    n = 1 if op == "Not" else draw(st.integers(1, 3))
    return {"type": "Logical", "content": {"operator": op, "expressions": [draw(filters(depth - 1)) for _ in range(n)]}}  # noqa: E501


# --- the independent reference ---------------------------------------------------------
def _rank(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return 1
    if isinstance(v, (int, float)):
        return 2
    return 3


def _eq(x: Any, y: Any) -> bool:
    return _rank(x) == _rank(y) and x == y


def _ref_cond(doc: dict[str, Any], f: str, op: str, v: Any) -> bool:  # noqa: PLR0911
    present = f in doc
    x = doc.get(f)
    if op == "Exists":
        return present == v
    if op in ("Eq", "Ne"):
        return _eq(x, v) if op == "Eq" else not _eq(x, v)
    if op in ("In", "NotIn"):
        hit = any(_eq(x, y) for y in v)
        return hit if op == "In" else not hit
    if op in ("Gt", "Gte", "Lt", "Lte"):
        if x is None or v is None or _rank(x) != _rank(v):
            return False
        return {"Gt": x > v, "Gte": x >= v, "Lt": x < v, "Lte": x <= v}[op]
    if not isinstance(x, str) or not isinstance(v, str):
        return False
    return {"Contains": v in x, "StartsWith": x.startswith(v), "EndsWith": x.endswith(v)}[op]


def _ref(doc: dict[str, Any], spec: dict[str, Any] | None) -> bool:
    if spec is None:
        return True
    c = spec["content"]
    if spec["type"] == "Condition":
        return _ref_cond(doc, c["field"], c["operator"], c["value"])
    subs = [_ref(doc, e) for e in c["expressions"]]
    return all(subs) if c["operator"] == "And" else any(subs) if c["operator"] == "Or" else not subs[0]


def _sort_key(doc: dict[str, Any], f: str) -> tuple[Any, ...]:
    v = doc.get(f)
    return (_rank(v), v) if v is not None else (0,)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(docs, st.one_of(st.none(), filters()), st.lists(st.tuples(st.sampled_from(FIELDS), st.booleans()), max_size=2),
       st.integers(0, 5), st.one_of(st.none(), st.integers(0, 10)))  # fmt: skip
def test_engine_equals_brute_force_with_and_without_indexes(
    records: list[dict[str, Any]], flt: dict[str, Any] | None, sort: list[tuple[str, bool]],
    skip: int, limit: int | None,
) -> None:
    with tempfile.TemporaryDirectory() as d, Database.open(Path(d) / "db") as db:
        plain, indexed = db.collection("plain"), db.collection("indexed")
        indexed.create_index("a", "ordered")
        indexed.create_index("b", "hash")
        indexed.create_index("s", "ordered")
        docs_with_ids = [{"id": f"{i:03d}", **r} for i, r in enumerate(records)]
        if docs_with_ids:
            plain.insert_many(docs_with_ids)
            indexed.insert_many(docs_with_ids)
        expected = [r for r in docs_with_ids if _ref(r, flt)]
        for f, asc in reversed(sort):
            expected.sort(key=lambda r, f=f: _sort_key(r, f), reverse=not asc)
        expected_ids = [r["id"] for r in expected][skip:][:limit] if limit is not None else [r["id"] for r in expected][skip:]  # noqa: E501
        for coll in (plain, indexed):
            got = coll.find(flt, sort=sort, skip=skip, limit=limit)
            assert [r["id"] for r in got] == expected_ids, coll.explain(flt, sort=sort)
        assert db.check() == []
