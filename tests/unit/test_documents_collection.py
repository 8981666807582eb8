"""Embedded documents on the real KVStore: CRUD, schemas, indexes, TTL, joins, reopen."""

from __future__ import annotations

import datetime as dt
import decimal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuffdb.documents import Database, Number, Vector, where
from tuffdb.errors import IntegrityError, NotFoundError, ProtocolError


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database.open(tmp_path / "docs", encryption_key=b"\x07" * 32)
    yield d
    assert d.check() == []
    d.close()


def test_insert_get_update_delete_round_trip(db: Database) -> None:
    users = db.collection("users")
    rid = users.insert({"name": "Ada", "age": 36, "price": decimal.Decimal("9.99")})
    assert users.get(rid) == {"id": rid, "name": "Ada", "age": 36, "price": decimal.Decimal("9.99")}
    assert users.update(rid, {"age": 37})["name"] == "Ada"  # merge keeps untouched fields
    assert users.delete(rid)["age"] == 37
    with pytest.raises(NotFoundError):
        users.get(rid)


def test_every_type_survives_close_and_reopen(tmp_path: Path) -> None:
    rec = {"u": uuid.uuid4(), "t": dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC),
           "d": dt.timedelta(seconds=90), "s": {"a", "b"}, "v": Vector([1.0, 2.0]), "n": Number(1.5),
           "bin": b"\x00", "by": bytearray(b"x"), "o": {"x": [decimal.Decimal("1.5")]}}  # fmt: skip
    with Database.open(tmp_path / "docs") as db:
        rid = db.collection("c").insert(rec)
    with Database.open(tmp_path / "docs") as db:
        got = db.collection("c").get(rid)
    assert got == {"id": rid, **rec} and type(got["by"]) is bytearray and type(got["n"]) is Number


def test_explicit_ids_are_honoured_and_duplicates_refused(db: Database) -> None:
    c = db.collection("c")
    assert c.insert({"id": "k1", "a": 1}) == "k1"
    with pytest.raises(IntegrityError):
        c.insert({"id": "k1", "a": 2})
    with pytest.raises(IntegrityError):
        c.insert_many([{"id": "k2"}, {"id": "k2"}])
    assert c.count() == 1


def test_find_sort_skip_limit_select_exclude(db: Database) -> None:
    c = db.collection("people")
    c.insert_many([{"name": n, "age": a} for n, a in [("a", 30), ("b", 20), ("c", 40), ("d", 30)]])
    got = c.find(where("age") >= 30, sort=[("age", False), ("name", True)], skip=1, limit=2,
                 select=["name"])  # fmt: skip
    assert [r["name"] for r in got] == ["a", "d"] and set(got[0]) == {"id", "name"}
    assert all("age" not in r for r in c.find(exclude=["age"]))
    assert c.count(where("age") == 30) == 2 and c.distinct("age") == [20, 30, 40]


def test_actions_and_sequences(db: Database) -> None:
    c = db.collection("c")
    rid = c.insert({"n": 10, "tags": ["a"], "s": "x"})
    c.action(rid, "increment", "n", 5)
    c.actions(rid, [("multiply", "n", 2), ("push", "tags", "b"), ("unshift", "tags", "z"),
                    ("append", "s", "y"), ("modulo", "n", 7)])  # fmt: skip
    got = c.get(rid)
    assert got["n"] == 2 and got["tags"] == ["z", "a", "b"] and got["s"] == "xy"
    c.actions(rid, [("pop", "tags"), ("shift", "tags"), ("remove", "tags", "a"), ("clear", "s")])
    assert c.get(rid)["tags"] == [] and c.get(rid)["s"] == ""
    with pytest.raises(IntegrityError):
        c.action(rid, "divide", "n", 0)
    with pytest.raises(ProtocolError):
        c.action(rid, "explode", "n")


def test_schema_violations_write_nothing(db: Database) -> None:
    c = db.create_collection("s", {"fields": {
        "email": {"field_type": "string", "required": True, "unique": True, "regex": "@"},
        "age": {"field_type": "Integer", "min": 0, "max": 150},
        "role": {"field_type": "String", "enums": ["admin", "user"], "default": "user"},
        "price": {"field_type": "Decimal"}}})  # fmt: skip
    rid = c.insert({"email": "a@x", "age": 3, "price": "1.25"})
    assert c.get(rid)["role"] == "user" and c.get(rid)["price"] == decimal.Decimal("1.25")
    for bad in [{"age": 1}, {"email": "nope"}, {"email": "b@x", "age": -1}, {"email": "b@x", "age": "3"},
                {"email": "b@x", "role": "root"}, {"email": "a@x"}]:  # fmt: skip
        with pytest.raises(IntegrityError):
            c.insert(bad)
    with pytest.raises(IntegrityError):
        c.insert_many([{"email": "ok@x"}, {"email": "ok@x"}])
    assert c.count() == 1


def test_indexes_are_used_and_rebuilt_after_reopen(tmp_path: Path) -> None:
    with Database.open(tmp_path / "docs") as db:
        c = db.collection("c")
        c.insert_many([{"k": i % 5, "t": f"t{i}"} for i in range(50)])
        c.create_index("k", "ordered")
        c.create_index("t", "hash")
    with Database.open(tmp_path / "docs") as db:
        c = db.collection("c")
        assert c.explain(where("k") > 2)["plan"] == "index_range"
        assert c.explain(where("t") == "t3")["plan"] == "index_eq"
        assert c.explain(where("t").one_of(["t1", "t2"]) & (where("k") >= 1))["plan"] == "index_and"
        assert c.explain(None, sort="-k")["plan"] == "index_sort"
        assert c.explain(where("t").contains("1"))["plan"] == "full_scan"
        assert len(c.find(where("k") > 2)) == 20 and c.find(where("t") == "t3")[0]["k"] == 3
        assert db.check() == []


def test_unique_index_refuses_duplicates_at_creation(db: Database) -> None:
    c = db.collection("c")
    c.insert_many([{"a": 1}, {"a": 1}])
    with pytest.raises(IntegrityError):
        c.create_index("a", "hash", unique=True)
    assert c.explain(where("a") == 1)["plan"] == "full_scan"


def test_ttl_records_expire_and_carry_their_expiry(db: Database) -> None:
    c = db.collection("c")
    short = c.insert({"a": 1}, ttl=0.3)
    long = c.insert({"a": 2, "ttl": "1h"})
    assert isinstance(c.get(short)["ttl"], dt.datetime)
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # the clock is the subject here, not a synchronisation
        time.sleep(0.05)
    with pytest.raises(NotFoundError):
        c.get(short)
    assert [r["id"] for r in c.find()] == [long]


def test_updates_merge_check_and_keep_ttl_whichever_path_they_take(db: Database) -> None:
    c = db.collection("c")
    rid = c.insert({"a": 1, "b": "x"})
    # the usual update: field order kept, a new field last, the store holds what is returned
    merged = {"id": rid, "a": 1, "b": "y", "z": [1, {"k": 2}]}
    assert c.update(rid, {"b": "y", "z": [1, {"k": 2}]}) == merged
    assert list(c.get(rid)) == ["id", "a", "b", "z"] and c.get(rid)["z"] == [1, {"k": 2}]
    for bad in [{"a": object()}, {"a": {1: "non-text key"}}, {"a": [object()]}]:
        with pytest.raises(TypeError):
            c.update(rid, bad)
    assert c.get(rid) == {"id": rid, "a": 1, "b": "y", "z": [1, {"k": 2}]}  # nothing written
    with pytest.raises(NotFoundError):
        c.update("missing", {"a": 2})
    # a record with a TTL keeps its expiry across an update; one given a TTL gets it
    timed = c.insert({"a": 1}, ttl="1h")
    expiry = c.get(timed)["ttl"]
    updated = c.update(timed, {"a": 2})
    assert updated["a"] == 2 and abs((updated["ttl"] - expiry).total_seconds()) < 60
    assert abs((c.get(timed)["ttl"] - expiry).total_seconds()) < 60
    assert isinstance(c.update(rid, {"ttl": "1h"})["ttl"], dt.datetime)
    assert isinstance(c.get(rid)["ttl"], dt.datetime)
    # unique indexes and schemas still apply to updates
    u = db.collection("u")
    first, second = u.insert({"e": "a"}), u.insert({"e": "b"})
    u.create_index("e", "hash", unique=True)
    with pytest.raises(IntegrityError):
        u.update(second, {"e": "a"})
    assert u.get(second)["e"] == "b" and u.update(first, {"e": "c"})["e"] == "c"
    s = db.create_collection("s", {"fields": {"age": {"field_type": "Integer", "min": 0}}})
    sid = s.insert({"age": 3})
    with pytest.raises(IntegrityError):
        s.update(sid, {"age": -1})
    assert s.get(sid)["age"] == 3


def test_joins_single_and_multi_collection(db: Database) -> None:
    db.collection("depts").insert({"id": "d1", "name": "eng"})
    db.collection("teams").insert({"dept": "d1", "name": "core"})
    emp = db.collection("emp")
    emp.insert({"name": "ada", "dept": "d1"})
    got = emp.find(join={"collections": ["depts"], "local_field": "dept", "foreign_field": "id",
                         "as_field": "department"})  # fmt: skip
    assert got[0]["department"][0]["name"] == "eng"
    got = emp.find(join={"collections": ["depts", "teams"], "local_field": "dept",
                         "foreign_field": "id", "as_field": "all"})  # fmt: skip
    assert [r["name"] for r in got[0]["all"]] == ["eng"]
    got = emp.find(join={"collections": ["teams"], "local_field": "dept", "foreign_field": "dept",
                         "as_field": "teams"})  # fmt: skip
    assert got[0]["teams"][0]["name"] == "core"


def test_upsert_update_many_delete_many_and_drop(db: Database) -> None:
    c = db.collection("c")
    c.upsert("x", {"a": 1})
    c.upsert("x", {"b": 2})
    assert c.get("x") == {"id": "x", "a": 1, "b": 2}
    c.insert_many([{"a": 1}, {"a": 2}])
    assert c.update_many(where("a") == 1, {"seen": True}) == 2
    assert c.delete_many(where("seen") == True) == 2  # noqa: E712
    assert db.drop_collection("c") == 1 and "c" not in db.collections()


def test_deleted_records_can_be_restored_from_the_trash(db: Database) -> None:
    c = db.collection("c")
    a, b = c.insert({"a": 1}), c.insert({"a": 2})
    c.delete(a)
    c.delete_many(where("a") == 2)
    assert c.restore(a) == {"id": a, "a": 1} and c.get(a)["a"] == 1
    with pytest.raises(NotFoundError):
        c.restore(a)  # restoring empties the trash slot
    assert c.restore_all() == 1 and c.get(b)["a"] == 2
    db.drop_collection("c")
    assert db.collection("c").restore_all() == 2 and db.collection("c").count() == 2


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), "1e400", 1e300])
def test_a_ttl_that_is_not_a_finite_number_is_refused_and_nothing_is_written(
        db: Database, ttl: object) -> None:
    """Before, NaN and infinity escaped as ValueError after parsing."""
    c = db.collection("ttl_bad")
    with pytest.raises(ProtocolError, match="finite"):
        c.insert({"a": 1}, ttl=ttl)
    assert c.count() == 0
