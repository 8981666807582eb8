"""Transactions: staging, read-your-writes, commit-time conflicts per isolation level, savepoints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tuffdb.documents import Database, where
from tuffdb.errors import ConflictError, IntegrityError, NotFoundError, OperationalError, ProgrammingError


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database.open(tmp_path / "docs")
    yield d
    assert d.check() == []
    d.close()


def test_writes_are_invisible_until_commit_and_visible_inside(db: Database) -> None:
    c = db.collection("acc")
    a = c.insert({"bal": 10})
    tx = db.transaction()
    new = tx.insert("acc", {"bal": 1})
    tx.update("acc", a, {"bal": 5})
    assert tx.get("acc", a)["bal"] == 5 and len(tx.find("acc", where("bal") < 10)) == 2
    assert c.get(a)["bal"] == 10 and c.count() == 1
    tx.commit()
    assert c.get(a)["bal"] == 5 and c.get(new)["bal"] == 1
    with pytest.raises(ProgrammingError):
        tx.insert("acc", {})


def test_rollback_discards_everything(db: Database) -> None:
    tx = db.transaction()
    tx.insert("c", {"a": 1})
    tx.rollback()
    assert "c" not in db.collections()


def test_write_write_conflict_first_committer_wins(db: Database) -> None:
    c = db.collection("acc")
    a = c.insert({"bal": 10})
    t1, t2 = db.transaction(), db.transaction()
    t1.update("acc", a, {"bal": 1})
    t2.update("acc", a, {"bal": 2})
    t1.commit()
    with pytest.raises(ConflictError):
        t2.commit()
    assert c.get(a)["bal"] == 1 and t2.status()["state"] == "Aborted"


def test_non_transactional_write_also_conflicts(db: Database) -> None:
    c = db.collection("acc")
    a = c.insert({"bal": 10})
    tx = db.transaction()
    tx.update("acc", a, {"bal": 1})
    c.update(a, {"bal": 99})
    with pytest.raises(ConflictError):
        tx.commit()
    assert c.get(a)["bal"] == 99


def test_read_committed_ignores_read_changes_repeatable_read_does_not(db: Database) -> None:
    c = db.collection("acc")
    a, b = c.insert({"bal": 10}), c.insert({"bal": 10})
    rc, rr = db.transaction("ReadCommitted"), db.transaction("RepeatableRead")
    for tx in (rc, rr):
        tx.get("acc", a)
        tx.update("acc", b, {"bal": 0}) if tx is rc else tx.insert("other", {"x": 1})
    c.update(a, {"bal": 11})
    assert rr.get("acc", a)["bal"] == 10  # repeatable: the first read is kept
    rc.commit()
    with pytest.raises(ConflictError):
        rr.commit()


def test_serializable_catches_phantoms(db: Database) -> None:
    c = db.collection("acc")
    c.insert({"bal": 10})
    tx = db.transaction("Serializable")
    assert len(tx.find("acc", where("bal") > 5)) == 1
    tx.insert("audit", {"seen": 1})
    c.insert({"bal": 50})
    with pytest.raises(ConflictError):
        tx.commit()
    assert "audit" not in db.collections()


def test_savepoints_roll_back_and_release(db: Database) -> None:
    tx = db.transaction()
    tx.insert("c", {"id": "a"})
    tx.savepoint("s1")
    tx.insert("c", {"id": "b"})
    tx.savepoint("s2")
    tx.insert("c", {"id": "c"})
    tx.rollback_to("s1")
    assert [r["id"] for r in tx.find("c")] == ["a"]
    tx.insert("c", {"id": "d"})
    tx.release("s1")
    with pytest.raises(NotFoundError):
        tx.rollback_to("s1")
    tx.commit()
    assert [r["id"] for r in db.collection("c").find()] == ["a", "d"]


def test_unique_violation_at_commit_writes_nothing(db: Database) -> None:
    c = db.collection("u")
    c.create_index("email", "hash", unique=True)
    tx = db.transaction()
    tx.insert("u", {"email": "a@x"})
    tx.insert("other", {"z": 1})
    c.insert({"email": "a@x"})
    with pytest.raises(IntegrityError):
        tx.commit()
    assert c.count() == 1 and "other" not in db.collections()


def test_timed_out_transaction_is_rolled_back(db: Database) -> None:
    tx = db.transaction(timeout=0.0)
    with pytest.raises(OperationalError):
        tx.insert("c", {})
    assert tx.status()["state"] == "TimedOut"


def test_context_manager_commits_or_rolls_back(db: Database) -> None:
    with db.transaction() as tx:
        tx.insert("c", {"id": "ok"})
    with pytest.raises(RuntimeError), db.transaction() as tx:
        tx.insert("c", {"id": "no"})
        raise RuntimeError
    assert [r["id"] for r in db.collection("c").find()] == ["ok"]


def test_concurrent_transfers_keep_the_total(db: Database) -> None:
    """Four threads move money between five accounts with retry-on-conflict; no update is
    lost and no transfer is applied twice, so the total is unchanged and the ledger of
    committed transfers explains every balance."""
    import random
    import threading

    c = db.collection("bank")
    for i in range(5):
        c.insert({"id": f"a{i}", "bal": 100})
    committed: list[tuple[str, str, int]] = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            src, dst = rng.sample([f"a{i}" for i in range(5)], 2)
            amount = rng.randint(1, 10)
            while True:
                tx = db.transaction("RepeatableRead")
                try:
                    a, b = tx.get("bank", src), tx.get("bank", dst)
                    assert a is not None and b is not None
                    tx.update("bank", src, {"bal": a["bal"] - amount})
                    tx.update("bank", dst, {"bal": b["bal"] + amount})
                    tx.commit()
                except ConflictError:
                    continue
                with lock:
                    committed.append((src, dst, amount))
                break

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    balances = {r["id"]: r["bal"] for r in c.find()}
    assert sum(balances.values()) == 500 and len(committed) == 160
    expected = {f"a{i}": 100 for i in range(5)}
    for src, dst, amount in committed:
        expected[src] -= amount
        expected[dst] += amount
    assert balances == expected


def test_abandoned_transactions_past_their_timeout_are_rolled_back_by_later_commits(db: Database) -> None:
    tx = db.transaction(timeout=0.0)
    tx.deadline -= 2.0  # as if it was begun and forgotten a while ago
    db.collection("c").insert({"a": 1})
    assert tx.state == "RolledBack" and tx.id not in db.active_transactions and db.versions == {}


def test_a_transaction_left_open_cannot_pin_the_version_table_without_bound(
        db: Database) -> None:
    """Every commit is recorded while any transaction is open, so one left open (a crashed
    client, a long timeout) grew that table with every write. Past its bound the oldest
    open transactions are ended: their commit gets ConflictError (retryable) and the
    table shrinks; newer transactions keep full conflict detection."""
    db.tracked_versions = 100
    c = db.collection("acc")
    a = c.insert({"bal": 1})
    old = db.transaction("RepeatableRead")
    assert old.get("acc", a) is not None
    for i in range(150):
        c.insert({"n": i})
    young = db.transaction("RepeatableRead")
    for i in range(150, 160):
        c.insert({"n": i})
    assert len(db.versions) <= 100
    with pytest.raises(ConflictError, match="retry"):
        old.commit()
    assert old.status()["state"] == "TooOld"
    # The younger one still sees a conflict on what it read ...
    assert young.get("acc", a) is not None
    young.update("acc", a, {"bal": 2})
    c.update(a, {"bal": 3})
    with pytest.raises(ConflictError):
        young.commit()
    # ... and one begun now commits.
    with db.transaction("Serializable") as tx:
        tx.update("acc", a, {"bal": 4})
    assert c.get(a)["bal"] == 4
