"""A transaction over the ekoDB API belongs to the API key that began it: another key,
even one that may write the same collections, cannot see it, join it, read its staged
writes, commit it or roll it back, and neither can an admin key. To that key the transaction id is unknown (404, as
an id that never existed). Before, any key that knew the id could do all of that: add
writes that the owner's commit then made its own, or commit or roll back the owner's
work at a moment of its choosing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import App  # noqa: E402


def plain(value: Any) -> Any:
    """A typed value as sent (``{"type": ..., "value": ...}``) as its value."""
    return value["value"] if isinstance(value, dict) and "value" in value else value


class Caller:
    def __init__(self, app: App, token: str) -> None:
        self.app, self.token = app, token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.app.call_as(self.token, method, path, body)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[App, Caller, Caller]]:
    app = App(tmp_path)
    try:
        perms = {"accounts": {"read": True, "write": True}}
        owner = Caller(app, app.login(app.app.keyring.create(collection_permissions=perms).key))
        other = Caller(app, app.login(app.app.keyring.create(collection_permissions=perms).key))
        yield app, owner, other
    finally:
        app.close()


def test_another_key_cannot_use_a_transaction_it_did_not_begin(
        two: tuple[App, Caller, Caller]) -> None:
    app, owner, other = two
    status, acct = owner.call("POST", "/api/insert/accounts", {"name": "a", "bal": 10})
    assert status == 200
    rid = acct["id"]
    status, begun = owner.call("POST", "/api/transactions", {"isolation_level": "Serializable"})
    assert status == 200
    tid = begun["transaction_id"]
    status, _ = owner.call("PUT", f"/api/update/accounts/{rid}?transaction_id={tid}", {"bal": 5})
    assert status == 200

    q = f"?transaction_id={tid}"
    for method, path, body in [
        ("GET", f"/api/transactions/{tid}", None),
        ("POST", f"/api/insert/accounts{q}", {"name": "planted", "bal": 1000}),
        ("PUT", f"/api/update/accounts/{rid}{q}", {"bal": 1000}),
        ("DELETE", f"/api/delete/accounts/{rid}{q}", None),
        ("GET", f"/api/find/accounts/{rid}{q}", None),
        ("POST", f"/api/find/accounts{q}", {}),
        ("POST", f"/api/transactions/{tid}/savepoints", {"name": "s"}),
        ("POST", f"/api/transactions/{tid}/savepoints/s/rollback", None),
        ("DELETE", f"/api/transactions/{tid}/savepoints/s", None),
        ("POST", f"/api/transactions/{tid}/rollback", None),
        ("POST", f"/api/transactions/{tid}/commit", None),
    ]:
        status, body = other.call(method, path, body)
        assert status == 404, (method, path, status, body)
        assert tid in json.dumps(body), (method, path, body)  # "no transaction '<id>'"

    admin = Caller(app, app.token)  # an admin key is another key too
    assert admin.call("POST", f"/api/transactions/{tid}/commit")[0] == 404

    # The owner's transaction is as the owner left it: active, one write staged.
    status, seen = owner.call("GET", f"/api/transactions/{tid}")
    assert (status, seen["state"], seen["operations_count"]) == (200, "Active", 1)
    status, staged = owner.call("GET", f"/api/find/accounts/{rid}{q}")
    assert (status, plain(staged["bal"])) == (200, 5)
    status, _ = owner.call("POST", f"/api/transactions/{tid}/commit")
    assert status == 200
    status, rows = owner.call("POST", "/api/find/accounts", {})
    assert status == 200
    assert [(plain(r["name"]), plain(r["bal"])) for r in rows] == [("a", 5)]


def test_the_owner_reaches_its_transaction_through_any_of_its_tokens(
        two: tuple[App, Caller, Caller]) -> None:
    """A transaction belongs to the key, not to the token: a fresh token of the same key
    (a client that logged in again) goes on with it."""
    app, owner, _ = two
    status, begun = owner.call("POST", "/api/transactions", {})
    assert status == 200
    tid = begun["transaction_id"]
    key = next(k for k in app.app.keyring._by_id.values()  # noqa: SLF001
               if app.app.keyring.verify(owner.token).key == k.key)
    again = Caller(app, app.login(key.key))
    status, _ = again.call("POST", f"/api/insert/accounts?transaction_id={tid}", {"name": "b"})
    assert status == 200
    assert again.call("POST", f"/api/transactions/{tid}/commit")[0] == 200
    assert [plain(r["name"]) for r in owner.call("POST", "/api/find/accounts", {})[1]] == ["b"]
