"""A key that may read only some fields of a collection, or only some collections, learns
nothing more through any other kind of read: filters, sorts, distinct values, joins,
searches and subscriptions that depend on what it may not read are refused (403), and
its default text search does not match on hidden fields. Before 2026-12-07 a distinct
listed an excluded field's values, a join returned a collection the key may not read, and
a filter on an excluded field picked records by its value (an oracle)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuffdb.security.auth import Permission

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import App  # noqa: E402

HIDDEN = {"type": "Condition", "content": {"field": "ssn", "operator": "Eq",
                                           "value": "ssn-3-secret"}}


class Limited:
    """The app, an admin's data, and a key that reads ``users`` without ``ssn``."""

    def __init__(self, app: App, **users: Any) -> None:
        self.app = app
        for i in range(5):
            app.call("POST", "/api/insert/users", {"name": f"u{i}", "ssn": f"ssn-{i}-secret",
                                                   "owner": f"o{i}", "age": i})
        app.call("POST", "/api/insert/vault", {"owner": "o1", "treasure": "gold"})
        app.call("POST", "/api/insert/open", {"owner": "o1", "note": "public"})
        app.call("POST", "/api/insert/partial", {"owner": "o1", "note": "x", "pin": "1234"})
        key = app.app.keyring.create(collection_permissions={
            "users": {"read": True, "write": True, **users},
            "open": ["read"],
            "partial": {"read": True, "exclude_fields": ["pin"]}})
        self.token = app.login(key.key)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.app.call_as(self.token, method, path, body)


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Limited]:
    app = App(tmp_path)
    try:
        yield Limited(app, exclude_fields=["ssn"])
    finally:
        app.close()


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/api/find/users", {"filter": HIDDEN}),
    ("POST", "/api/find/users", {"filter": {"type": "Logical", "content": {
        "operator": "Or", "expressions": [{"type": "Condition", "content": {
            "field": "age", "operator": "Gt", "value": 100}}, HIDDEN]}}}),
    ("POST", "/api/find/users", {"sort": [{"field": "ssn", "ascending": False}]}),
    ("POST", "/api/distinct/users/ssn", {}),
    ("POST", "/api/distinct/users/name", {"filter": HIDDEN}),
    ("POST", "/api/search/users", {"query": "ssn-3-secret", "fields": ["ssn"]}),
    ("POST", "/api/search/users", {"query": "u3", "weights": {"ssn": 2.0}}),
    ("POST", "/api/search/users", {"query": "u3", "filters": HIDDEN}),
    ("POST", "/api/find/users", {"join": {"collections": ["open"], "local_field": "ssn",
                                          "foreign_field": "owner", "as_field": "j"}}),
    ("GET", "/api/subscribe/users?filter_field=ssn&filter_value=x", None),
], ids=["filter", "filter inside Or", "sort", "distinct", "distinct's filter",
        "search fields", "search weights", "search filters", "join on a hidden field",
        "subscribe filter"])
def test_reads_that_depend_on_a_hidden_field_are_refused(
        limited: Limited, method: str, path: str, body: Any) -> None:
    status, reply = limited.call(method, path, body)
    assert status == 403, reply
    assert "ssn" in reply["message"]
    assert "secret" not in json.dumps(reply)


@pytest.mark.parametrize(("coll", "why"), [("vault", "may not read collection 'vault'"),
                                          ("partial", "only some fields")])
def test_a_join_needs_the_whole_joined_collection(limited: Limited, coll: str,
                                                  why: str) -> None:
    join = {"collections": [coll], "local_field": "owner", "foreign_field": "owner",
            "as_field": "j"}
    status, reply = limited.call("POST", "/api/find/users", {"join": join})
    assert status == 403 and why in reply["message"]
    assert "gold" not in json.dumps(reply) and "1234" not in json.dumps(reply)


def test_what_the_key_may_read_still_works(limited: Limited) -> None:
    status, rows = limited.call("POST", "/api/find/users", {
        "filter": {"type": "Condition", "content": {"field": "age", "operator": "Gte",
                                                    "value": 3}},
        "sort": [{"field": "name", "ascending": True}],
        "join": {"collections": ["open"], "local_field": "owner", "foreign_field": "owner",
                 "as_field": "j"}})
    assert status == 200
    assert [r["name"]["value"] for r in rows] == ["u3", "u4"]
    assert all("ssn" not in r for r in rows)
    status, rows = limited.call("POST", "/api/find/users", {"join": {
        "collections": ["open"], "local_field": "owner", "foreign_field": "owner",
        "as_field": "j"}})
    assert status == 200
    joined = {r["name"]["value"]: r["j"] for r in rows}
    assert [j["note"] for j in joined["u1"]["value"]] == ["public"]
    assert joined["u0"]["value"] == []
    status, reply = limited.call("POST", "/api/distinct/users/name", {})
    assert status == 200 and len(reply["values"]) == 5
    # A text search without fields searches only what the key may read: "secret" is in
    # every ssn and nowhere else, and matches nothing; a visible value is found.
    status, reply = limited.call("POST", "/api/search/users", {"query": "secret"})
    assert status == 200 and reply["results"] == []
    status, reply = limited.call("POST", "/api/search/users", {"query": "u3"})
    assert status == 200 and [h["record"]["name"]["value"] for h in reply["results"]] == ["u3"]
    assert reply["results"][0]["matched_fields"] == ["name"]
    assert "ssn" not in reply["results"][0]["record"]


def test_an_admin_and_an_unrestricted_key_are_not_limited(tmp_path: Path) -> None:
    app = App(tmp_path)
    try:
        limited = Limited(app)  # read and write on users, no field restriction
        status, rows = limited.call("POST", "/api/find/users", {"filter": HIDDEN})
        assert status == 200 and [r["name"]["value"] for r in rows] == ["u3"]
        assert app.call("POST", "/api/distinct/users/ssn", {})["count"] == 5
        found = app.call("POST", "/api/search/users", {"query": "secret"})["results"]
        assert len(found) == 5
    finally:
        app.close()


@pytest.mark.parametrize(("perm", "path", "ok"), [
    (Permission(read=True, exclude_fields=["a"]), "a", False),
    (Permission(read=True, exclude_fields=["a"]), "a.b", False),
    (Permission(read=True, exclude_fields=["a.b"]), "a", False),  # holds the hidden a.b
    (Permission(read=True, exclude_fields=["a.b"]), "a.c", True),
    (Permission(read=True, exclude_fields=["a"]), "ab", True),
    (Permission(read=True, select_fields=["a"]), "a.b", True),
    (Permission(read=True, select_fields=["a.b"]), "a", False),  # more than the selection
    (Permission(read=True, select_fields=["a"]), "b", False),
    (Permission(read=True, select_fields=["a"]), "id", True),
])
def test_which_paths_a_restricted_key_may_read(perm: Permission, path: str, ok: bool) -> None:
    assert perm.may_read(path) is ok
