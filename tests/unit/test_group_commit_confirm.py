"""The group commit's confirmation step (a cluster leader waits for its followers there):
a round that is not confirmed fails its own waiters with the confirmation's error, without
poisoning the store, and later rounds are acknowledged again once confirmed; while one
round awaits its confirmation the next one is written (the two overlap)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb.events import EventStore
from tuffdb.events import codec as ecodec
from tuffdb.events.api import Event
from tuffdb.errors import NotEnoughReplicasError, NotLeaderError


class Gate:
    """A confirmation step that fails while ``refuse`` is set and counts its calls; with
    ``hold`` set it keeps the callbacks until :meth:`release` (followers that are slow)."""

    def __init__(self) -> None:
        self.refuse = False
        self.hold = False
        self.calls = 0
        self.held: list[Callable[[BaseException | None], None]] = []
        self.lock = threading.Condition()

    def __call__(self, done: Callable[[BaseException | None], None]) -> None:
        with self.lock:
            self.calls += 1
            self.lock.notify_all()
            if self.hold:
                self.held.append(done)
                return
        done(NotEnoughReplicasError("not enough followers confirmed the write")
             if self.refuse else None)

    def wait_calls(self, n: int) -> None:
        with self.lock:
            assert self.lock.wait_for(lambda: self.calls >= n, timeout=60), self.calls

    def release(self) -> None:
        with self.lock:
            held, self.held, self.hold = self.held, [], False
        for done in held:
            done(None)


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


def test_the_next_round_is_written_while_one_awaits_its_followers(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path / "kv", durability="interval", interval_ms=60_000)
    gate = Gate()
    store._committer.confirm = gate
    try:
        gate.hold = True
        store.put(b"a", b"1")
        first: Future[None] = store.when_durable(store.write_ticket())
        gate.wait_calls(1)
        store.put(b"b", b"2")
        second: Future[None] = store.when_durable(store.write_ticket())
        gate.wait_calls(2)  # written and fsynced while the first still awaits confirmation
        assert not first.done() and not second.done(), "acknowledged before confirmed"
        gate.release()
        first.result(timeout=60)
        second.result(timeout=60)
        waiter_done = threading.Event()
        gate.hold = True
        store.put(b"c", b"3", sync=False)

        def wait() -> None:
            store.wait_durable(store.write_ticket())
            waiter_done.set()

        t = threading.Thread(target=wait)
        t.start()
        gate.wait_calls(3)
        assert not waiter_done.is_set(), "a thread waiter returned before its confirmation"
        gate.release()
        t.join(60)
        assert waiter_done.is_set()
    finally:
        gate.release()
        store._committer.confirm = None
        store.close()


def _tapped_keys(tapped: list[list[tuple[str, int, bytes]]], store: KVStore) -> list[bytes]:
    return [r.key for parts in tapped for _, _, frames in parts
            for r in store.replica_records(frames)]


def test_stepping_down_acknowledges_nothing_that_followers_did_not_confirm(
        tmp_path: Path) -> None:
    store = KVStore.open(tmp_path / "kv", durability="interval", interval_ms=60_000)
    gate = Gate()
    tapped: list[list[tuple[str, int, bytes]]] = []
    store.set_replication_hooks(tapped.append, gate)
    try:
        gate.hold = True
        store.put(b"a", b"1")
        pending: Future[None] = store.when_durable(store.write_ticket())
        gate.wait_calls(1)  # round 1 awaits its followers
        store.put(b"b", b"2", sync=False)  # buffered while rounds still need confirmation
        store.set_replication_hooks(None, None)  # the node steps down
        buffered: Future[None] = store.when_durable(store.write_ticket())
        assert not pending.done() and not buffered.done(), (
            "a round done locally released writes still awaiting confirmation")
        with gate.lock:
            held, gate.held, gate.hold = gate.held, [], False
        for done in held:  # the sequencer, closed, refuses what was pending
            done(NotLeaderError("stepped down"))
        with pytest.raises(NotLeaderError):
            pending.result(timeout=60)
        with pytest.raises(NotLeaderError):
            buffered.result(timeout=60)
        # What was buffered went out through the tap before it was removed: the leader's
        # sequence numbered it, so a rejoining node knows it holds it.
        assert _tapped_keys(tapped, store) == [b"a", b"b"]
        with pytest.raises(NotLeaderError):  # a follower takes no writes of its own
            store.put(b"c", b"3", sync=False)
        with pytest.raises(NotLeaderError):
            store.write_batch([("put", b"c", b"3")], sync=False)
        assert store.get(b"c") is None and store.raced_writes == 0
        store.set_replication_hooks(tapped.append, gate)  # leading again
        store.put(b"c", b"3", sync=True)
        assert _tapped_keys(tapped, store)[-1] == b"c"
    finally:
        gate.release()
        store.close()


def test_a_waiter_ticketed_after_a_step_down_learns_its_earlier_writes_were_refused(
        tmp_path: Path) -> None:
    """An event loop takes one ticket for a pass's writes when the pass ends (LoopRounds).
    If the node stepped down meanwhile, the round carrying them was refused, and a timer
    round that settled locally since (no followers after a step-down) made that ticket a
    later, successful one: the writes were acknowledged though no follower had them. A
    ticket taken before the first write (``since``) says which rounds carried them."""
    store = KVStore.open(tmp_path / "kv", durability="interval", interval_ms=60_000)
    gate = Gate()
    store.set_replication_hooks(lambda parts: None, gate)
    try:
        since = store.write_ticket()  # the pass begins
        store.put(b"a", b"1", sync=False)
        gate.refuse = True  # the sequencer, closed, refuses the round carrying it
        store.set_replication_hooks(None, None)  # the node steps down
        timer: Future[None] = store.when_durable(store.write_ticket())  # a timer round
        assert isinstance(timer.exception(timeout=60), NotEnoughReplicasError | NotLeaderError)
        ticket = store.write_ticket()  # the pass ends: its ticket is a later round's
        assert store.when_durable(ticket).result(timeout=60) is None  # (settled locally)
        with pytest.raises((NotEnoughReplicasError, NotLeaderError)):
            store.when_durable(ticket, since).result(timeout=60)
        store.set_replication_hooks(lambda parts: None, Gate())  # leading again
        since = store.write_ticket()
        store.put(b"b", b"2", sync=False)
        assert store.when_durable(store.write_ticket(), since).result(timeout=60) is None
    finally:
        store.close()


def test_a_put_that_raced_the_step_down_is_refused_and_counted(tmp_path: Path) -> None:
    """put's lock-free path checks the refusal first and again after its write; one that
    passed the first check before the step-down and wrote after it ends in _put_slow."""
    store = KVStore.open(tmp_path / "kv", durability="interval", interval_ms=60_000)
    store.set_replication_hooks(lambda parts: None, Gate())
    try:
        seg = store._active  # a put passed its check and took the active segment ...
        store.set_replication_hooks(None, None)  # ... the node stepped down ...
        with pytest.raises(NotLeaderError):  # ... and its second check sends it here
            store._put_slow(seg, b"k", b"v", None)
        assert store.raced_writes == 1  # the node counts it as a round it led alone
    finally:
        store.close()


def test_a_stepped_down_event_store_refuses_appends_submitted_while_it_led(
        tmp_path: Path) -> None:
    def deferred(store: EventStore, name: str) -> Future[int]:
        tails, types, tags, uuids = ecodec.encode_events([Event(type=name, data=b"x", tags=[name])], b"")
        return store.submit_encoded(tails, types, tags, uuids, defer=True)  # type: ignore[return-value]

    store = EventStore.open(tmp_path / "events")
    gate = Gate()
    store.set_replication_hooks(lambda parts: None, gate)
    try:
        gate.hold = True
        first = deferred(store, "first")
        store.commit_deferred()  # written, awaiting its followers
        gate.wait_calls(1)
        queued = deferred(store, "queued")  # routed here while leading, not yet committed
        store.set_replication_hooks(None, None)  # the node steps down
        store.commit_deferred()
        with pytest.raises(NotLeaderError):
            queued.result()
        with gate.lock:
            held, gate.held, gate.hold = gate.held, [], False
        for done in held:
            done(NotLeaderError("stepped down"))
        with pytest.raises(NotLeaderError):
            first.result()
        later = deferred(store, "later")  # after the step-down: refused too (a follower)
        store.commit_deferred()
        with pytest.raises(NotLeaderError):
            later.result()
        store.set_replication_hooks(lambda parts: None, gate)  # leading again
        again = deferred(store, "again")
        store.commit_deferred()
        assert again.result() >= 1
        names = [e.event.type for e in store.read()]
        assert "queued" not in names and "later" not in names, "a refused append was written"
        assert "again" in names
    finally:
        store.close()
