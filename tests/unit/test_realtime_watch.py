"""Embedded collection.watch(): committed mutations in commit order, filters (deletes
always pass), transactions as one commit, a slow watcher cut off without slowing writers."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from tuffdb.documents import Database
from tuffdb.errors import ClosedError, IntegrityError, OperationalError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database.open(tmp_path / "docs", durability="always")
    yield d
    assert d.check() == []
    d.close()


def drain(sub) -> list[tuple[str, list[str]]]:  # noqa: ANN001
    out = []
    while (e := sub.get(timeout=0)) is not None:
        out.append((e["event"], e["record_ids"]))
    return out


def test_insert_update_delete_arrive_in_commit_order(db: Database) -> None:
    users = db.collection("users")
    with users.watch() as sub:
        users.insert({"id": "u1", "name": "Ada"})
        users.update("u1", {"name": "Ada L."})
        users.insert_many([{"id": "u2"}, {"id": "u3"}])
        users.delete("u1")
        first = sub.get(timeout=0)
        assert first is not None
        assert first["records"] == [{"id": "u1", "name": "Ada"}]
        assert first["collection"] == "users"
        assert first["timestamp"].endswith("Z")
        assert drain(sub) == [("update", ["u1"]), ("insert", ["u2", "u3"]), ("delete", ["u1"])]


def test_filter_narrows_inserts_and_updates_but_deletes_pass(db: Database) -> None:
    users = db.collection("users")
    users.insert({"id": "old", "status": "inactive"})
    active = {
        "type": "Condition",
        "content": {"field": "status", "operator": "Eq", "value": "active"},
    }
    with (
        users.watch(active) as sub,
        users.watch(filter_field="status", filter_value="active") as sub2,
    ):
        users.insert_many([{"id": "a", "status": "active"}, {"id": "b", "status": "inactive"}])
        users.update("b", {"status": "active"})
        users.update("a", {"status": "inactive"})
        users.delete("old")
        want = [("insert", ["a"]), ("update", ["b"]), ("delete", ["old"])]
        assert drain(sub) == want
        assert drain(sub2) == want


def test_failed_and_uncommitted_writes_are_not_seen_and_a_transaction_is_one_event(
    db: Database,
) -> None:
    users = db.collection("users")
    users.insert({"id": "x"})
    with users.watch() as sub:
        with pytest.raises(IntegrityError):
            users.insert({"id": "x"})
        tx = db.transaction()
        tx.insert("users", {"id": "t1"})
        tx.insert("users", {"id": "t2"})
        assert drain(sub) == []
        tx.commit()
        assert drain(sub) == [("insert", ["t1", "t2"])]


def test_other_collections_are_not_seen(db: Database) -> None:
    with db.collection("a").watch() as sub:
        db.collection("b").insert({"id": "1"})
        assert drain(sub) == []


def test_a_slow_watcher_is_disconnected_with_a_reason_and_writers_finish(db: Database) -> None:
    users = db.collection("users")
    slow = users.watch(max_buffered=3)
    fine = users.watch()
    for i in range(10):
        users.insert({"id": f"r{i}"})
    with pytest.raises(OperationalError, match="fell behind"):
        slow.get(timeout=0)
    assert len(drain(fine)) == 10
    slow.close()
    fine.close()
    with pytest.raises(ClosedError):
        fine.get(timeout=0)


def test_a_reader_thread_receives_every_committed_write_in_order(db: Database) -> None:
    users = db.collection("users")
    sub = users.watch()
    got: list[str] = []

    def reader() -> None:
        for event in sub:
            got.extend(event["record_ids"])
            if len(got) == 200:
                return

    t = threading.Thread(target=reader)
    t.start()
    for i in range(200):
        users.insert({"id": f"{i:04d}"})
    t.join(60)
    assert not t.is_alive()
    assert got == [f"{i:04d}" for i in range(200)]
    sub.close()


def test_schema_changes_arrive_only_when_asked_for(db: Database) -> None:
    users = db.collection("users")
    users.insert({"id": "u"})
    with users.watch(schema_events=True) as sub, users.watch() as plain:
        users.set_schema({"fields": {"name": {"field_type": "String"}}})
        users.set_schema({"fields": {"name": {"field_type": "String", "required": False}}})
        first, second = sub.get(timeout=0), sub.get(timeout=0)
        assert first is not None
        assert second is not None
        assert first["event"] == "schema_changed"
        assert (first["version"], second["version"]) == (1, 2)
        assert first["primary_key_alias"] == "id"
        assert drain(plain) == []


def test_closing_the_database_ends_its_subscriptions_and_wakes_their_readers(
        tmp_path: Path) -> None:
    d = Database.open(tmp_path / "docs")
    users = d.collection("users")
    waited, iterated = users.watch(), users.watch()
    got: dict[str, object] = {}

    def wait() -> None:
        try:
            got["waited"] = waited.get()  # no timeout: only the close can end it
        except ClosedError as exc:
            got["waited"] = str(exc)

    threads = [threading.Thread(target=wait),
               threading.Thread(target=lambda: got.__setitem__("iterated", list(iterated)))]
    for t in threads:
        t.start()
    d.close()
    for t in threads:
        t.join(timeout=60)  # (a guard against hanging the suite, not a synchronisation)
        assert not t.is_alive()
    assert got == {"waited": "the database was closed: this subscription ended with it",
                   "iterated": []}
    waited.close()  # closing an ended subscription is harmless and keeps its reason
    with pytest.raises(ClosedError, match="database was closed"):
        waited.get(timeout=0)
