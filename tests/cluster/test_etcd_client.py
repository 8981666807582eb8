"""tuffdb.cluster.etcd against a real private etcd 3.4 (its JSON gateway), no mocks.

The client is the ground the leader election and failover stand on, so each promise it
makes is shown on a live server: a transaction that loses says so and shows the winner,
a lease that is not renewed expires and takes its key with it, a watch sees puts and
deletes in order and breaks loudly (never silently) when etcd goes away, and a dead or
paused endpoint is either skipped or reported with whether the write may have happened.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from itertools import count

import httpx
import pytest

from tuffdb.cluster.etcd import Compare, EtcdClient, Op, PutResult, RangeResult, Watch, prefix_end
from tuffdb.errors import (
    CoordinationError,
    CoordinationUnavailable,
    LeaseExpired,
    OperationalError,
    ProgrammingError,
)
from tuffdb.testing.cluster import until
from tuffdb.testing.etcd import EtcdCluster, free_port

_names = count()


@pytest.fixture
def client(etcd: EtcdCluster) -> Iterator[EtcdClient]:
    with EtcdClient(etcd.endpoints, timeout=5.0) as c:
        yield c


@pytest.fixture
def ns() -> str:
    """A key prefix of this test's own (the module shares one etcd)."""
    return f"/t{next(_names)}/"


class Collector:
    """Iterates a watch on a thread, handing its responses over a queue."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.items: queue.Queue[object] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for response in self.watch:
                for event in response.events:
                    self.items.put(event)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc
        self.items.put(None)

    def next(self) -> object:
        return self.items.get(timeout=30)

    def finish(self) -> BaseException | None:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return self.error


def test_errors_are_one_family() -> None:
    assert issubclass(CoordinationUnavailable, CoordinationError)
    assert issubclass(LeaseExpired, CoordinationError)
    assert issubclass(CoordinationError, OperationalError)
    assert CoordinationUnavailable("x", maybe_applied=True).maybe_applied


def test_no_endpoint_is_a_programming_error() -> None:
    with pytest.raises(ProgrammingError, match="--etcd"):
        EtcdClient(" , ")


def test_prefix_end_covers_exactly_the_prefix() -> None:
    assert prefix_end(b"/a/") == b"/a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"") == b"\0"


def test_put_get_roundtrip_binary_and_text(client: EtcdClient, ns: str) -> None:
    assert client.get(ns + "missing").first is None
    first = client.put(ns + "k", b"\x00\xffbinary")
    second = client.put(ns + "k", "text é")
    assert second.revision == first.revision + 1
    kv = client.get(ns + "k").first
    assert kv is not None
    assert kv.value == "text é".encode()
    assert (kv.create_revision, kv.mod_revision, kv.version) == (first.revision,
                                                                 second.revision, 2)
    assert client.get(ns + "k", serializable=True).first == kv
    past = client.get(ns + "k", revision=first.revision).first
    assert past is not None and past.value == b"\x00\xffbinary"


def test_prefix_range_limit_and_keys_only(client: EtcdClient, ns: str) -> None:
    for name in ("b", "a", "c"):
        client.put(ns + name, name * 3)
    client.put(ns[:-1] + "x", "outside")  # shares the prefix's text but not the slash
    whole = client.get(ns, prefix=True)
    assert [kv.key for kv in whole.kvs] == [f"{ns}{n}".encode() for n in "abc"]
    assert whole.count == 3 and not whole.more
    page = client.get(ns, prefix=True, limit=2, keys_only=True)
    assert [kv.value for kv in page.kvs] == [b"", b""]
    assert page.count == 3 and page.more


def test_delete_key_and_prefix_with_previous_values(client: EtcdClient, ns: str) -> None:
    client.put(ns + "a", "1")
    client.put(ns + "b", "2")
    one = client.delete(ns + "a", prev_kv=True)
    assert one.deleted == 1 and [kv.value for kv in one.prev_kvs] == [b"1"]
    assert client.delete(ns + "a").deleted == 0
    client.put(ns + "c", "3")
    rest = client.delete(ns, prefix=True)
    assert rest.deleted == 2
    assert client.get(ns, prefix=True).count == 0


def test_txn_create_if_absent_wins_once_and_the_loser_sees_the_winner(
        client: EtcdClient, ns: str) -> None:
    key = ns + "leader"

    def campaign(me: str) -> tuple[bool, RangeResult | PutResult | object]:
        result = client.txn([Compare.create(key, "==", 0)], [Op.put(key, me)], [Op.get(key)])
        return result.succeeded, result.responses[0]

    won, put = campaign("node-1")
    assert won and isinstance(put, PutResult)
    lost, holder = campaign("node-2")
    assert not lost
    assert isinstance(holder, RangeResult) and holder.first is not None
    assert holder.first.value == b"node-1"
    # The epoch (create_revision) is the winning put's revision.
    assert holder.first.create_revision == put.revision


def test_txn_compares_on_mod_revision_and_value(client: EtcdClient, ns: str) -> None:
    key = ns + "register"
    rev = client.put(key, "v1").revision
    cas = client.txn([Compare.mod(key, "==", rev)], [Op.put(key, "v2")])
    assert cas.succeeded
    stale = client.txn([Compare.mod(key, "==", rev)], [Op.put(key, "v3")])
    assert not stale.succeeded and stale.responses == ()
    by_value = client.txn([Compare.value(key, "==", "v2"), Compare.version(key, "==", 2)],
                          [Op.delete(key), Op.put(ns + "moved", "v2")], [])
    assert by_value.succeeded and len(by_value.responses) == 2
    assert client.get(key).first is None
    assert client.get(ns + "moved").first is not None


def test_txn_on_duplicate_keys_is_refused_with_its_code(client: EtcdClient, ns: str) -> None:
    with pytest.raises(CoordinationError) as info:
        client.txn([], [Op.put(ns + "d", "1"), Op.put(ns + "d", "2")])
    assert info.value.code == 3  # INVALID_ARGUMENT: "duplicate key given in txn request"
    assert not isinstance(info.value, CoordinationUnavailable)


def test_lease_that_is_not_renewed_expires_and_takes_its_key(client: EtcdClient,
                                                            ns: str) -> None:
    lease = client.lease_grant(1)
    client.put(ns + "owned", "me", lease=lease)
    kv = client.get(ns + "owned").first
    assert kv is not None and kv.lease == lease
    status = client.lease_ttl(lease, keys=True)
    assert status.granted_ttl == 1 and status.keys == ((ns + "owned").encode(),)
    until("the leased key to go", lambda: client.get(ns + "owned").first is None)
    assert client.lease_ttl(lease).ttl == -1
    with pytest.raises(LeaseExpired):
        client.lease_keepalive(lease)
    with pytest.raises(LeaseExpired):
        client.put(ns + "owned", "again", lease=lease)
    # The lost leadership is visible to a guarded write: the key's create_revision is 0.
    assert not client.txn([Compare.create(ns + "owned", "!=", 0)], [Op.put(ns + "x", "")]
                          ).succeeded


def test_keepalive_renews_and_revoke_deletes_at_once(client: EtcdClient, ns: str) -> None:
    lease = client.lease_grant(30)
    client.put(ns + "a", "1", lease=lease)
    assert client.lease_keepalive(lease) == 30
    assert 0 < client.lease_ttl(lease).ttl <= 30
    client.lease_revoke(lease)
    assert client.get(ns + "a").first is None
    with pytest.raises(LeaseExpired):
        client.lease_keepalive(lease)
    with pytest.raises(LeaseExpired):
        client.lease_revoke(lease)


def test_watch_sees_puts_and_deletes_in_order_then_cancels_quietly(client: EtcdClient,
                                                                   ns: str) -> None:
    before = client.put(ns + "start", "").revision
    collector = Collector(client.watch(ns + "w/", prefix=True, prev_kv=True))
    # History from before the watch is not replayed: start_revision was 0 (now).
    client.put(ns + "w/a", "1")
    client.put(ns + "other", "not watched")
    client.put(ns + "w/a", "2")
    client.delete(ns + "w/a")
    client.put(ns + "w/b", "3")
    seen = [collector.next() for _ in range(4)]
    assert [(e.type, e.kv.key, e.kv.value) for e in seen] == [  # type: ignore[attr-defined]
        ("PUT", f"{ns}w/a".encode(), b"1"), ("PUT", f"{ns}w/a".encode(), b"2"),
        ("DELETE", f"{ns}w/a".encode(), b""), ("PUT", f"{ns}w/b".encode(), b"3")]
    assert seen[2].prev_kv.value == b"2"  # type: ignore[attr-defined]
    revisions = [e.kv.mod_revision for e in seen]  # type: ignore[attr-defined]
    assert revisions == sorted(revisions) and revisions[0] > before
    collector.watch.cancel()
    assert collector.finish() is None


def test_a_returned_watch_misses_nothing_and_a_silent_one_times_out(client: EtcdClient,
                                                                    ns: str) -> None:
    for round_ in range(3):  # a watch is confirmed by etcd before watch() returns
        watch = client.watch(ns + "r")
        put = client.put(ns + "r", str(round_))
        response = next(iter(watch))
        assert watch.start_revision < put.revision == response.events[0].kv.mod_revision
        watch.cancel()
    quiet = client.watch(ns + "quiet", idle_timeout=0.2)
    with pytest.raises(CoordinationUnavailable, match="broke"):
        next(iter(quiet))


def test_a_watch_outlives_the_request_timeout(etcd: EtcdCluster, ns: str) -> None:
    with EtcdClient(etcd.endpoints, timeout=1.0) as client:
        watch = client.watch(ns + "long")
        time.sleep(1.5)  # the scenario itself: a quiet spell longer than the timeout
        client.put(ns + "long", "late")
        assert next(iter(watch)).events[0].kv.value == b"late"
        watch.cancel()


def test_watch_from_a_revision_replays_history(client: EtcdClient, ns: str) -> None:
    start = client.put(ns + "h", "1").revision
    client.put(ns + "h", "2")
    watch = client.watch(ns + "h", start_revision=start)
    values = []
    for response in watch:
        values += [e.kv.value for e in response.events]
        if len(values) == 2:
            watch.cancel()
    assert values == [b"1", b"2"]
    assert watch.revision >= start + 1


def test_watch_from_a_compacted_revision_raises_with_the_compaction_point(
        client: EtcdClient, ns: str) -> None:
    old = client.put(ns + "c", "1").revision
    now = client.put(ns + "c", "2").revision
    client.compact(now)
    with pytest.raises(CoordinationError) as info:
        next(iter(client.watch(ns + "c", start_revision=old)))
    assert info.value.compact_revision == now
    with pytest.raises(CoordinationError, match="compacted") as read:
        client.get(ns + "c", revision=old)
    assert read.value.code == 11


def test_a_dead_endpoint_is_skipped(etcd: EtcdCluster, ns: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with EtcdClient(f"{dead},{etcd.endpoints[0]}", timeout=5.0) as client:
        assert client.endpoint == dead
        client.put(ns + "k", "v")  # a refused connection was never sent: the put moved on
        assert client.endpoint == etcd.endpoints[0]
        assert client.get(ns + "k").first is not None


def test_all_endpoints_down_is_unavailable_and_not_applied() -> None:
    with EtcdClient([f"http://127.0.0.1:{free_port()}"] * 2, timeout=5.0) as client:
        with pytest.raises(CoordinationUnavailable, match="no etcd endpoint") as info:
            client.put("k", "v")
        assert not info.value.maybe_applied


@pytest.mark.once
def test_killed_etcd_breaks_the_watch_loudly_and_a_restart_serves_again(
        etcd_factory: Callable[..., EtcdCluster]) -> None:
    etcd = etcd_factory()
    member = etcd.members[0]
    with EtcdClient(etcd.endpoints, timeout=5.0) as client:
        collector = Collector(client.watch("/k", prefix=True))
        client.put("/k/1", "before")
        assert collector.next() is not None
        member.kill()
        assert collector.next() is None  # the stream ended ...
        assert isinstance(collector.finish(), CoordinationUnavailable)  # ... loudly
        with pytest.raises(CoordinationUnavailable):
            client.get("/k/1")
        member.restart()
        kv = client.get("/k/1").first
        assert kv is not None and kv.value == b"before"  # etcd fsynced it before answering


@pytest.mark.once
def test_paused_etcd_times_out_writes_as_maybe_applied_and_silent_watches(
        etcd_factory: Callable[..., EtcdCluster]) -> None:
    etcd = etcd_factory()
    member = etcd.members[0]
    with EtcdClient(etcd.endpoints, timeout=0.5) as client:
        client.put("/p", "1")
        member.pause()
        try:
            with pytest.raises(CoordinationUnavailable) as put:
                client.put("/p", "2")
            assert put.value.maybe_applied  # sent, no answer: the caller cannot know
            with pytest.raises(CoordinationUnavailable) as read:
                client.get("/p")
            assert not read.value.maybe_applied
            with pytest.raises(CoordinationUnavailable, match="did not confirm a watch"):
                client.watch("/p")
        finally:
            member.resume()
        assert client.get("/p").first is not None


@pytest.mark.once
def test_three_members_survive_one_killed(etcd_factory: Callable[..., EtcdCluster]) -> None:
    etcd = etcd_factory(size=3)
    # The member killed is a raft follower: a write in flight when etcd's *leader* dies
    # can wait for etcd's own request timeout (about 6 s) and come back as
    # CoordinationUnavailable(maybe_applied=True), which the client reports as such.
    statuses = [httpx.post(f"{m.url}/v3/maintenance/status", json={}, timeout=5).json()
                for m in etcd.members]
    follower = next(i for i, st in enumerate(statuses) if st["leader"] != st["header"]["member_id"])
    first = etcd.members[follower]
    others = [m.url for m in etcd.members if m is not first]
    with EtcdClient([first.url, *others], timeout=5.0) as client:
        client.put("/three", "1")
        assert client.endpoint == first.url
        first.kill()
        assert client.put("/three", "2").revision > 0  # refused connection: next endpoint
        assert client.endpoint != first.url
        collector = Collector(client.watch("/three"))
        client.put("/three", "3")
        event = collector.next()
        assert event is not None and event.kv.value == b"3"  # type: ignore[attr-defined]
        collector.watch.cancel()
        assert collector.finish() is None
        first.restart()
        first.wait_ready()
        with EtcdClient([first.url], timeout=5.0) as direct:
            until("the restarted member catching up",
                  lambda: (kv := direct.get("/three", serializable=True).first) is not None
                  and kv.value == b"3")
