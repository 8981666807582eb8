"""Non-interference of field restrictions on the ekoDB face: two databases hold the same
records except for the values of the fields a key may not read; every request that key
makes (find with filters, sorts, projections and joins, distinct, text search with or
without fields) gets byte-identical answers from both. A second collection, joined, is
unreadable, readable whole or readable but for one field, at random. An answer that differed would tell the
key something about a field it may not read (a filter on it, probed value by value,
reads it out). The restrictions are random per example: ``exclude_fields`` or
``select_fields`` over top-level and nested fields."""

from __future__ import annotations

import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuffdb.security.auth import Permission
from tuffdb.server.ekodb.proto import Request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from ekodb_app_harness import App  # noqa: E402

FIELDS = ["a", "b", "c", "d.e", "d.f"]
WORDS = ["red", "green", "blue", "gold", "iron"]
OPS = ["Eq", "Ne", "Gt", "Lt", "Contains", "StartsWith", "Exists", "In"]


def _record(i: int, rng: random.Random) -> dict[str, Any]:
    return {"id": f"r{i}", "a": rng.randint(0, 3), "b": rng.choice(WORDS),
            "c": f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
            "d": {"e": rng.randint(0, 3), "f": rng.choice(WORDS)}}


def _set(record: dict[str, Any], path: str, value: Any) -> None:
    head, _, rest = path.partition(".")
    if rest:
        _set(record[head], rest, value)
    else:
        record[head] = value


def _get(record: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        record = record[part]
    return record


class Pair:
    """Two apps with the same records but for the fields ``perm`` hides, and the same
    restricted key in both."""

    def __init__(self, perm: dict[str, Any], seed: int, xperm: Any = None) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        rng = random.Random(seed)
        base = [_record(i, rng) for i in range(8)]
        hidden = [f for f in FIELDS if not Permission(read=True, **perm).may_read(f)]
        # A second collection to join: unreadable (xperm None: every value differs between
        # the two databases), readable whole (the same), or without its "v" (that differs).
        xs = [{"id": f"x{i}", "k": WORDS[i % len(WORDS)], "v": i} for i in range(6)]
        grants = {"t": {"read": True, **perm}}
        if xperm is not None:
            grants["x"] = xperm
        self.apps: list[App] = []
        self.tokens: list[str] = []
        for n in range(2):
            app = App(Path(self.tmp.name) / f"db{n}")
            other = random.Random(seed * 2 + n)
            for rec in base:
                rec = json.loads(json.dumps(rec))
                for path in hidden:
                    _set(rec, path, _get(_record(0, other), path))
                app.call("POST", "/api/insert/t", rec)
            for x in xs:
                x = dict(x)
                if xperm is None:
                    x["k"] = other.choice(WORDS)
                if xperm is None or "exclude_fields" in xperm:
                    x["v"] = other.randint(0, 99)
                app.call("POST", "/api/insert/x", x)
            key = app.app.keyring.create(collection_permissions=grants)
            self.apps.append(app)
            self.tokens.append(app.login(key.key))

    def ask(self, method: str, path: str, body: Any) -> list[tuple[int, str]]:
        out = []
        for app, token in zip(self.apps, self.tokens, strict=True):
            resp = app.app.handle(Request(method, path.encode(), {
                "content-type": "application/json", "authorization": f"Bearer {token}"},
                json.dumps(body).encode()))
            text = bytes(resp.body).decode()  # type: ignore[union-attr]
            out.append((resp.status, re.sub(r'"execution_time_ms":\s*[0-9.]+', "", text)))
        return out

    def close(self) -> None:
        for app in self.apps:
            app.close()
        self.tmp.cleanup()


perms = st.one_of(
    st.builds(lambda xs: {"exclude_fields": xs}, st.lists(st.sampled_from(
        ["a", "b", "c", "d", "d.e", "d.f"]), min_size=1, max_size=3, unique=True)),
    st.builds(lambda xs: {"select_fields": xs}, st.lists(st.sampled_from(
        ["a", "b", "c", "d", "d.e"]), min_size=1, max_size=3, unique=True)),
)
values = st.one_of(st.integers(0, 3), st.sampled_from(WORDS), st.just("re"))
conditions = st.builds(lambda f, op, v: {"type": "Condition", "content": {
    "field": f, "operator": op, "value": [v] if op == "In" else (True if op == "Exists" else v)}},
    st.sampled_from([*FIELDS, "d"]), st.sampled_from(OPS), values)
filters = st.one_of(st.none(), conditions, st.builds(
    lambda xs: {"type": "Logical", "content": {"operator": "Or", "expressions": xs}},
    st.lists(conditions, min_size=1, max_size=3)))
joins = st.one_of(st.none(), st.builds(lambda local, foreign: {
    "collections": ["x"], "local_field": local, "foreign_field": foreign, "as_field": "j"},
    st.sampled_from(["b", "d.f", "a"]), st.sampled_from(["k", "v", "id"])))
requests = st.one_of(
    st.builds(lambda f, s, sel, j: ("POST", "/api/find/t", {
        "filter": f, "sort": [{"field": s, "ascending": True}] if s else None,
        "select_fields": sel, "limit": 5, "join": j}),
        filters, st.one_of(st.none(), st.sampled_from(FIELDS)),
        st.one_of(st.none(), st.lists(st.sampled_from(FIELDS), min_size=1, max_size=2)),
        joins),
    st.builds(lambda f, flt: ("POST", f"/api/distinct/t/{f}", {"filter": flt}),
              st.sampled_from(FIELDS), filters),
    st.builds(lambda q, fields: ("POST", "/api/search/t", {"query": q, "fields": fields}),
              st.sampled_from([*WORDS, "green blue", "re"]),
              st.one_of(st.none(), st.lists(st.sampled_from(FIELDS), min_size=1, max_size=2))),
)


@settings(max_examples=int(os.environ.get("TUFFDB_NONINTERFERENCE_EXAMPLES", "40")),
          deadline=None, suppress_health_check=list(HealthCheck))
@given(perm=perms, seed=st.integers(0, 10**6), asks=st.lists(requests, min_size=1, max_size=6),
       xperm=st.sampled_from([None, ["read"], {"read": True, "exclude_fields": ["v"]}]))
def test_answers_do_not_depend_on_what_the_key_may_not_read(
        perm: dict[str, Any], seed: int, asks: list[tuple[str, str, Any]], xperm: Any) -> None:
    pair = Pair(perm, seed, xperm)
    try:
        for method, path, body in asks:
            first, second = pair.ask(method, path, body)
            assert first == second, (perm, method, path, body)
    finally:
        pair.close()
