"""The group commit's confirmation step (a cluster leader waits for its followers there):
a round that is not confirmed fails its own waiters with the confirmation's error, without
poisoning the store, and later rounds are acknowledged again once confirmed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb.errors import NotEnoughReplicasError


class Gate:
    """A confirmation step that fails while ``refuse`` is set and counts its calls."""

    def __init__(self) -> None:
        self.refuse = False
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.calls += 1
        if self.refuse:
            raise NotEnoughReplicasError("not enough followers confirmed the write")


def test_an_unconfirmed_round_fails_its_waiters_and_leaves_the_store_writable(
        tmp_path: Path) -> None:
    store = KVStore.open(tmp_path / "kv", durability="always")
    gate = Gate()
    store._committer.confirm = gate
    try:
        store.put(b"a", b"1")
        assert gate.calls >= 1
        gate.refuse = True
        with pytest.raises(NotEnoughReplicasError):
            store.put(b"b", b"2")
        store.put(b"c", b"3", sync=False)
        with pytest.raises(NotEnoughReplicasError):
            store.when_durable(store.write_ticket()).result(timeout=60)
        assert store.begin_round(lambda: None) is None, "no split rounds while confirming"
        gate.refuse = False
        store.put(b"d", b"4")  # confirmed again: acknowledged, the store was never poisoned
        assert store.get(b"b") == b"2", "the unconfirmed write is durable here, only not acked"
    finally:
        store._committer.confirm = None
        store.close()
    reopened = KVStore.open(tmp_path / "kv")
    try:
        assert {k: reopened.get(k) for k in (b"a", b"b", b"c", b"d")} == {
            b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4"}
    finally:
        reopened.close()


def test_waiters_of_a_failed_round_learn_it_even_after_later_rounds(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path / "kv", durability="interval", interval_ms=60_000)
    gate = Gate()
    store._committer.confirm = gate
    try:
        store.put(b"x", b"1")
        ticket = store.write_ticket()
        gate.refuse = True
        with pytest.raises(NotEnoughReplicasError):
            store.wait_durable(ticket)
        gate.refuse = False
        store.put(b"y", b"2")
        store.wait_durable(store.write_ticket())  # a later round is confirmed
        with pytest.raises(NotEnoughReplicasError):
            store.when_durable(ticket).result(timeout=60)  # the failed one still says so
    finally:
        store._committer.confirm = None
        store.close()
