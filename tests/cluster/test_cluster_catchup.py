"""Followers that fall behind, and a leader that is paused past its lease.

- A follower killed while the leader writes past its replication buffer comes back, is
  told it needs a snapshot, installs the leader's consistent snapshot before its stores
  open, then tails: it ends with exactly the leader's data.
- A leader stopped with SIGSTOP past its lease is replaced; when it resumes it
  acknowledges nothing more (its writes fail), steps down, gives up whatever it wrote that
  the new leader never had, and rejoins as a follower: the cluster converges, and every
  write acknowledged at any time is on every node.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from tuffdb import KVStore
from tuffdb.testing.cluster import ServerCluster, ServerNode, until

from tuffdb.testing.etcd import EtcdCluster

pytestmark = pytest.mark.once


@pytest.fixture
def make_cluster(tmp_path: Path, etcd: EtcdCluster) -> Iterator[object]:
    made: list[ServerCluster] = []

    def make(name: str, **options: object) -> ServerCluster:
        c = ServerCluster(tmp_path / name, etcd.endpoint_list, size=3, cluster=name,
                          **options).start()  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def _all_keys(node: ServerNode) -> dict[bytes, bytes]:
    r = redis.Redis(*node.resp)
    return {k: r.get(k) for k in r.scan_iter(count=1000)}  # type: ignore[misc]


def _set_keys(node: ServerNode, prefix: str, count: int = 20) -> None:
    """``prefix:i`` = i for i < count, each acknowledged by ``node``."""
    r = redis.Redis(*node.resp)
    for i in range(count):
        assert r.set(f"{prefix}:{i}", i)


def _caught_up(node: ServerNode, leader: ServerNode) -> bool:
    mine, theirs = node.health().get("cluster", {}), leader.health().get("cluster", {})
    return mine.get("link") == "up" and mine.get("lsn") == theirs.get("lsn")


def test_a_follower_behind_the_buffer_catches_up_from_a_snapshot(make_cluster: object) -> None:
    cluster = make_cluster("snap", extra=["--replication-buffer-mb", "1"])  # type: ignore[operator]
    leader = cluster.leader()
    cluster.in_sync(leader, 2)
    lagging = cluster.followers(leader)[0]
    lagging.kill()
    r = redis.Redis(*leader.resp)
    pipe_size = 100
    for start in range(0, 3000, pipe_size):  # ~3 MiB of rounds: past the 1 MiB buffer
        pipe = r.pipeline(transaction=False)
        for i in range(start, start + pipe_size):
            pipe.set(f"k{i}", os.urandom(1024))  # incompressible: the rounds stay large
        assert all(pipe.execute())
    lagging.start()
    until("the lagging follower to catch up", lambda: _caught_up(lagging, leader))
    events = [line.get("event") for line in lagging.drain()
              if not str(line.get("event", "")).startswith("HTTP")]
    assert "snapshot installed" in events, [e for e in events if e not in ("listening",)]
    assert _all_keys(lagging) == _all_keys(leader)
    assert len(_all_keys(lagging)) == 3000


def test_a_leader_paused_past_its_lease_acknowledges_nothing_more_and_rejoins(
        make_cluster: object) -> None:
    cluster = make_cluster("pause")  # type: ignore[operator]
    old = cluster.leader()
    cluster.in_sync(old, 2)
    acked: dict[str, bytes] = {}
    stop = threading.Event()
    errors: list[str] = []

    def writer(name: str, target: ServerNode) -> None:
        r = redis.Redis(*target.resp, socket_timeout=60)
        i = 0
        while not stop.is_set():
            key = f"{name}:{i}"
            try:
                if r.set(key, key):
                    acked[key] = key.encode()
            except redis.exceptions.RedisError as exc:  # refused: not acknowledged
                errors.append(type(exc).__name__)
            i += 1

    w = threading.Thread(target=writer, args=("old", old), daemon=True)
    w.start()
    try:
        until("some acknowledged writes", lambda: len(acked) >= 50)
        old.signal(signal.SIGSTOP)
        new = cluster.leader(exclude=old)
        nr = redis.Redis(*new.resp)
        for i in range(50):
            assert nr.set(f"new:{i}", f"new:{i}")
            acked[f"new:{i}"] = f"new:{i}".encode()
        old.signal(signal.SIGCONT)
        until("the old leader to step down", lambda: old.role() == "follower")
    finally:  # a failure above must not leave the writer running (pytest would wait)
        stop.set()
        w.join(timeout=120)
    assert not w.is_alive()
    until("the old leader to rejoin and catch up", lambda: _caught_up(old, new))
    final = _all_keys(new)
    missing = {k: v for k, v in acked.items() if final.get(k.encode()) != v}
    assert missing == {}, f"acknowledged writes lost: {sorted(missing)[:10]}"
    for node in cluster.nodes:
        until(f"{node.node_id} to hold the leader's data",
              lambda node=node: _all_keys(node) == final)
    assert errors, "the writer saw its in-flight writes refused once the leader lost its lease"
    events = {line.get("event") for line in old.drain()}
    assert "role: follower (stepped down)" in events
    # The followers were in sync: one a round or two behind the other at the failover
    # streams those from the new leader's ring (the rounds it applied as a follower),
    # never a whole snapshot.
    for node in cluster.followers(old):
        assert "snapshot installed" not in {line.get("event") for line in node.drain()}


def test_a_leader_killed_holding_a_round_no_follower_got_gives_it_up_when_it_rejoins(
        make_cluster: object) -> None:
    """The leader makes a write durable and is killed before any follower applies it
    (both followers stopped, then killed, so the round they had been sent is lost with
    their socket buffers). The write was never acknowledged. A follower becomes leader
    without it; the old leader, restarted, must give it up (its stores hold it past the
    position it last saved), not keep a write no other node has."""
    cluster = make_cluster("phantom")  # type: ignore[operator]
    old = cluster.leader()
    cluster.in_sync(old, 2)
    _set_keys(old, "acked")
    followers = cluster.followers(old)
    for f in followers:
        f.signal(signal.SIGSTOP)
    before = old.health()["cluster"]["lsn"]
    refused: list[BaseException] = []

    def write() -> None:
        try:
            redis.Redis(*old.resp, socket_timeout=60).set("phantom", "never acknowledged")
        except redis.exceptions.RedisError as exc:
            refused.append(exc)

    w = threading.Thread(target=write)
    w.start()
    until("its round to be durable there (numbered: the tap runs after the fsync)",
          lambda: old.health()["cluster"]["lsn"] > before)
    old.kill()
    for f in followers:
        f.kill()  # the round waiting in their sockets goes with them
    w.join(timeout=60)
    assert refused, "the write was not acknowledged"
    kv = KVStore.open(old.dir / "kv")  # what the old leader holds when it starts again
    try:
        held = kv.get(b"phantom")  # the RESP face's string encoding: a type byte first
        assert held is not None and held.endswith(b"never acknowledged")
    finally:
        kv.close()
    for f in followers:
        f.start()
    new = cluster.leader(exclude=old)
    cluster.in_sync(new, 1)
    old.start()
    cluster.in_sync(new, 2)
    final = _all_keys(new)
    assert b"phantom" not in final
    assert all(final.get(f"acked:{i}".encode()) == str(i).encode() for i in range(20))
    for node in cluster.nodes:  # the old leader kept the write before (docs: Known gaps)
        until(f"{node.node_id} to hold the leader's data",
              lambda node=node: _all_keys(node) == final)
    events = [line.get("event") for line in old.drain()]
    assert "snapshot installed" in events
    # The new leader was killed too: elected unsure of its own tail, it counted a round
    # for it, so the other follower took its snapshot rather than streaming past it.
    assert any(str(line.get("event")).startswith("elected while unsure")
               for line in new.drain())


def test_nobody_campaigns_while_a_sync_member_that_alone_holds_acked_writes_is_unseen(
        make_cluster: object) -> None:
    """Writes acknowledged while one follower (a) was stopped are on the leader and the
    other follower (b) only. All three are killed; a alone comes back. It must not lead
    (b alone may hold acknowledged writes it lacks): it says so and waits; once b is back,
    the new leader holds every acknowledged write."""
    cluster = make_cluster("unseen")  # type: ignore[operator]
    old = cluster.leader()
    cluster.in_sync(old, 2)
    a, b = cluster.followers(old)
    a.signal(signal.SIGSTOP)
    _set_keys(old, "acked")  # confirmed by b (one follower suffices)
    for node in (old, b, a):
        node.kill()
    a.start()
    until("a to say it waits for the sync-set member it cannot see",
          lambda: any(str(line.get("event")).startswith("not campaigning")
                      for line in a.drain()))
    assert a.role() != "leader"
    b.start()
    new = cluster.leader(exclude=old)
    assert new is b  # the one holding the acknowledged writes
    final = _all_keys(new)
    assert all(final.get(f"acked:{i}".encode()) == str(i).encode() for i in range(20))
    old.start()
    for node in cluster.nodes:
        until(f"{node.node_id} to hold the leader's data",
              lambda node=node: _all_keys(node) == final)


def test_a_leader_stopped_cleanly_rejoins_from_its_position_without_a_snapshot(
        make_cluster: object) -> None:
    """A planned restart of the leader (SIGTERM: it hands its key over, its faces stop,
    it saves its exact position) costs no snapshot: it streams on from where it was."""
    cluster = make_cluster("planned")  # type: ignore[operator]
    old = cluster.leader()
    cluster.in_sync(old, 2)
    _set_keys(old, "before")
    assert old.stop() == 0
    new = cluster.leader(exclude=old)
    _set_keys(new, "after")
    old.start()
    cluster.in_sync(new, 2)
    final = _all_keys(new)
    assert len([k for k in final if k.startswith((b"before:", b"after:"))]) == 40
    until("the old leader to hold the leader's data", lambda: _all_keys(old) == final)
    events = [line.get("event") for line in old.drain()]
    assert "snapshot installed" not in events
    assert "following" in events


def test_a_node_with_another_cluster_secret_is_turned_away(make_cluster: object) -> None:
    """The leader's replication port admits only nodes that prove the cluster's secret
    (derived here from the encryption key every node shares): a node restarted with
    another ``--cluster-secret`` gets no stream and no snapshot, and never joins the sync
    set; restarted as before, it catches up."""
    cluster = make_cluster("secret")  # type: ignore[operator]
    leader = cluster.leader()
    cluster.in_sync(leader, 2)
    stranger = cluster.followers(leader)[0]
    stranger.stop()
    plain = list(stranger.argv)
    stranger.argv = [*plain, "--cluster-secret", "not-the-cluster's"]
    stranger.start()
    until("the stranger to be turned away", lambda: any(
        line.get("event") == "the leader turned this node away" for line in stranger.drain()))
    until("the leader to refuse it", lambda: any(
        line.get("event") == "replication connection refused: it does not know the cluster "
                             "secret" for line in leader.drain()))
    _set_keys(leader, "while-away")  # acknowledged with the third node alone
    followers = leader.health()["cluster"]["followers"]
    assert not followers.get(stranger.node_id, {}).get("connected")
    assert redis.Redis(*stranger.resp).get("while-away:0") is None
    stranger.stop()
    stranger.argv = plain
    stranger.start()
    cluster.in_sync(leader, 2)
    until("the node to catch up", lambda: _caught_up(stranger, leader))
    assert _all_keys(stranger) == _all_keys(leader)
