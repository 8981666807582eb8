"""One server's membership in a cluster: its role, the election, and what it tells etcd.

Keys under ``/tuffdb/<cluster>/`` in etcd:

| key | value (JSON) | lifetime |
|---|---|---|
| ``leader`` | the leader's node id, address and ports | the leader's lease; its ``create_revision`` is the **epoch** |
| ``members/<id>`` | each live node's role, epoch, durable LSN, lag, address, ports | that node's lease |
| ``sync`` | ``{epoch, leader, members}``: the followers whose acknowledgements count | written by the leader of ``epoch`` only |
| ``nodes/<id>`` | the node's address (a registry of every node that ever joined) | permanent |

A node holds one lease (``--lease-ttl`` seconds) for its member key and, while it leads,
the leader key. One control thread renews it every third of the TTL and runs the role:

- **leader**: while renewals succeed, ``Lease.deadline`` (the send time of the last
  successful renewal + TTL - margin, monotonic) keeps moving and writes are confirmed
  (:mod:`tuffdb.cluster.sequencer`). A renewal that fails leaves the deadline where it is:
  at the deadline the node stops acknowledging, before etcd can expire the key and
  elect another. A leader key that is gone or holds another epoch makes it step down.
- **follower**: tails the leader named by the key (:mod:`tuffdb.cluster.follower`).
  When the key is gone, it stops tailing (its LSN is then final), publishes it, and
  campaigns if it is the eligible member furthest ahead, judged once every eligible rival
  is a candidate too (its published LSN final) or two TTLs have passed: with
  ``sync_replicas`` >= 1 only
  the last leader and the members of the last ``sync`` set are eligible (Patroni's
  synchronous mode), so a new leader holds every acknowledged write; and while as many
  members of that set as a write needs are not seen at all (dead, or not registered again
  after a restart), nobody campaigns: they alone may hold the newest acknowledged
  writes. The campaign is one etcd transaction: create ``leader`` if absent, under its
  lease.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuffdb import metrics
from tuffdb.cluster import state as node_state
from tuffdb.cluster import wire
from tuffdb.cluster.appliers import Applier
from tuffdb.cluster.etcd import Compare, EtcdClient, Op
from tuffdb.cluster.follower import ReplicationClient, connect, fetch_snapshot
from tuffdb.cluster.leader import ReplicationServer, SnapshotFile
from tuffdb.cluster.sequencer import Lease, Round, Sequencer
from tuffdb.cluster.status import cluster_keys
from tuffdb.errors import (
    CoordinationError,
    LeaseExpired,
    NotEnoughReplicasError,
    NotLeaderError,
    ProtocolError,
)
from tuffdb.log import get_logger

log = get_logger("tuffdb.cluster")

TICK_S = 0.1
# A member record is put again at most this often unless what it says about the node's
# role, epoch or link changed (then at once: an election reads candidates' records).
# Every put is an etcd write (a raft round and an fsync on each etcd member); at every
# tick they cost the leader's host more CPU than its followers' shipping did.
PUBLISH_S = 1.0
FORWARD_MARGIN_S = 5.0  # a forwarded request waits the confirmation bound plus this
LEASE_MARGIN_FRACTION = 0.2  # of the TTL: a leader stops acknowledging this much early

FAILOVERS = metrics.REGISTRY.counter(
    "tuffdb_cluster_failovers_total", "times this node became the leader of a new epoch")
EPOCH = metrics.REGISTRY.gauge("tuffdb_cluster_epoch", "the leader epoch this node follows or leads")
LSN = metrics.REGISTRY.gauge("tuffdb_cluster_lsn", "this node's durable replication position")
IS_LEADER = metrics.REGISTRY.gauge("tuffdb_cluster_is_leader", "1 while this node leads")
IN_SYNC = metrics.REGISTRY.gauge("tuffdb_cluster_sync_replicas_in_sync",
                                 "followers in the leader's sync set")
LAG_S = metrics.REGISTRY.gauge("tuffdb_cluster_lag_seconds",
                               "a follower: how far behind the leader's clock; a leader: the "
                               "largest of its followers'")
LAG_BYTES = metrics.REGISTRY.gauge("tuffdb_cluster_lag_bytes",
                                   "a leader: bytes of rounds its slowest follower lacks")
TRUNCATED = metrics.REGISTRY.counter(
    "tuffdb_cluster_truncated_rounds_total",
    "rounds this node gave up when it rejoined a new leader (never acknowledged under "
    "synchronous replication)")


@dataclass
class Attached:
    """A store the node replicates: ``store`` takes the leader's hooks
    (``set_replication_hooks``) and, through its ``shipper``, consistent snapshots for
    followers; ``applier`` applies a leader's rounds to it here; ``on_promote`` runs when
    this node becomes the leader (the documents' intents are finished then)."""

    name: str
    store: Any
    applier: Applier
    on_promote: Callable[[], None] | None = None


class Node:
    def __init__(self, config: Any, *, restart: Callable[[str], None],
                 secret: bytes | None = None) -> None:
        self.config = config
        # What this node proves on the leader's replication port, and asks of those that
        # connect to its own while it leads (wire.py; config.cluster_secret).
        self.secret = secret
        self.cluster: str = config.cluster
        self.node_id: str = config.node_id
        self.advertise: str = config.advertise or config.host
        self.ports = {"resp": config.resp_port, "grpc": config.grpc_port,
                      "http": config.http_port, "admin": config.admin_port,
                      "replication": config.replication_port}
        self.dir: Path = Path(config.data_dir) / "cluster"
        self.ring_bytes = int(config.replication_buffer_mb) << 20
        self.state = node_state.load(self.dir)
        ttl = max(1, int(config.lease_ttl))
        self.ttl = ttl
        self.lease = Lease(ttl_s=float(ttl), margin_s=max(0.2, ttl * LEASE_MARGIN_FRACTION))
        self.etcd = EtcdClient(config.etcd, timeout=max(0.3, ttl / 4))
        self.prefix = f"/tuffdb/{self.cluster}/"
        self.role = "booting"
        self.stores: dict[str, Attached] = {}
        self.sequencer: Sequencer | None = None
        self.server: ReplicationServer | None = None
        self.client: ReplicationClient | None = None
        self.leader: dict[str, Any] | None = None  # the leader key's value
        self.leader_epoch = 0
        self.members: dict[str, dict[str, Any]] = {}
        self.sync: dict[str, Any] = {}
        self.known_nodes: set[str] = set()
        self.truncated_rounds = 0
        self.failovers = 0
        self._deposed = False  # stepped down and not following anyone since
        self._raced_seen = 0  # the stores' raced_writes already counted as a round
        self._restart = restart
        self._lease_id = 0
        self._renewed_at = 0.0  # monotonic send time of the last successful renewal
        self._published: tuple[Any, ...] | None = None  # what the last put said that matters
        self._published_at = 0.0  # monotonic time of the last member put
        self._no_leader_since: float | None = None
        self._waiting_for_unseen = False  # _elect said so once
        # The rounds the last follower session applied (its ring), kept while a candidate:
        # elected, this node serves followers a little behind it from them, not a snapshot.
        self._kept_rounds: list[Round] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuffdb-cluster", daemon=True)
        self._lock = threading.RLock()
        # Faces register what the leader does with a forwarded request (kind -> handler);
        # followers' connections for forwarding, by leader address.
        self.forward_handlers: dict[str, Any] = {}
        self._forward_idle: dict[str, list[socket.socket]] = {}
        self._forward_lock = threading.Lock()

    # -- start-up, before and after the stores open ----------------------------------------
    def bootstrap(self, store_dirs: dict[str, Path]) -> None:
        """Join: take a lease, register, and if a leader exists whose log this node cannot
        tail from its position, install the leader's snapshot (the stores are not open)."""
        self._grant()
        self.etcd.put(self.prefix + "nodes/" + self.node_id,
                      json.dumps({"node": self.node_id, "advertise": self.advertise}))
        self._publish()
        leader, epoch = self._read_leader()
        if leader is not None and leader.get("node") == self.node_id:
            # Our previous run's key: its lease cannot be renewed by this process.
            lease = int(leader.get("lease", 0))
            if lease and lease != self._lease_id:
                try:
                    self.etcd.lease_revoke(lease)
                except CoordinationError:
                    pass
                log.info("released the leader key of this node's previous run", epoch=epoch)
            leader = None
        if leader is None:
            return
        try:
            truncated = fetch_snapshot(self._repl_address(leader), cluster=self.cluster,
                                       node=self.node_id, state=self.state,
                                       data_dir=Path(self.config.data_dir), stores=store_dirs,
                                       secret=self.secret)
            if truncated:
                self.truncated_rounds += truncated
                TRUNCATED.inc(truncated)
        except (OSError, ConnectionError, ProtocolError) as exc:
            log.warning("could not ask the leader for a snapshot at start; following will retry",
                        leader=leader.get("node"), reason=str(exc))

    def attach(self, store: Attached) -> None:
        with self._lock:
            self.stores[store.name] = store
            if self.role in {"follower", "candidate"}:
                _refuse_writes(store)

    def start(self) -> None:
        with self._lock:
            self.role = "follower"
            for s in self.stores.values():
                _refuse_writes(s)
        self._thread.start()

    def stop(self) -> None:
        """Leave: a leader gives up its key at once (followers elect without waiting for
        the lease to run out)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with self._lock:
            if self.role == "leader":
                self._demote("shutting down")
            if self.client is not None:
                self.client.stop()
                if self.client.diverged is None and not self.state.unsure:
                    self.state.open_epoch = 0  # every round applied is counted in the LSN
                self.client = None
            node_state.save(self.dir, self.state)
        if self._lease_id:
            try:
                self.etcd.lease_revoke(self._lease_id)
            except CoordinationError:
                pass
        self.etcd.close()
        self.role = "stopped"

    def settle(self) -> None:
        """After :meth:`stop` and the faces' stop (no store takes a write any more): a node
        that led holds exactly its LSN unless a write raced its step-down, so it saves
        that it is sure (``open_epoch`` 0) and a planned restart streams on from its
        position instead of taking a snapshot. With a raced write it stays unsure."""
        with self._lock:
            if not self.state.open_epoch or self.state.unsure or self.client is not None:
                return
            if not self._count_raced_writes():
                self.state.open_epoch = 0
            node_state.save(self.dir, self.state)

    # -- what the faces ask --------------------------------------------------------------
    def is_leader(self) -> bool:
        return self.role == "leader" and self.lease.valid()

    def leader_address(self, face: str) -> str | None:
        """``host:port`` of the leader's ``face`` (resp, grpc, http), when another node is
        known to lead (never this one: a node that lost its lease must not forward to
        itself)."""
        leader = self.leader
        if leader is None or leader.get("node") == self.node_id:
            return None
        port = leader.get("ports", {}).get(face)
        return f"{leader.get('advertise')}:{port}" if port else None

    def last_lsn(self) -> int:
        """The last round this node wrote (leader) or applied (follower)."""
        seq = self.sequencer
        return seq.last_lsn if seq is not None else self.state.lsn

    def read_own_write(self, lsn: int) -> None:
        """On a follower, after the leader answered a write forwarded through it with
        ``lsn`` (every round covering that write): wait until this node applied that far,
        so the client that wrote reads its write here. Bounded by the confirm timeout (a
        follower cut off from the stream answers anyway: the write itself is safe)."""
        client = self.client
        if client is not None and lsn > self.state.lsn:
            if not client.wait_applied(lsn, max(1.0, self.config.confirm_timeout_ms / 1000)):
                log.warning("a forwarded write answered before this follower applied it",
                            lsn=lsn, applied=self.state.lsn)

    def not_leader(self, face: str) -> NotLeaderError:
        return NotLeaderError("this node is a read-only follower", self.leader_address(face))

    def status(self) -> dict[str, Any]:
        seq = self.sequencer
        out: dict[str, Any] = {
            "cluster": self.cluster, "node": self.node_id, "role": self.role,
            "epoch": self.leader_epoch, "lsn": seq.last_lsn if seq else self.state.lsn,
            "leader": self.leader.get("node") if self.leader else None,
            "failovers": self.failovers, "truncated_rounds": self.truncated_rounds,
            "sync_replicas": self.required(), "lease_valid": self.lease.valid(),
        }
        if seq is not None:
            now_ns = time.time_ns()
            followers = {}
            for f in list(seq.followers.values()):
                oldest = seq.oldest_unacked_ns(f.acked)
                followers[f.node] = {
                    "connected": f.connected, "acked_lsn": f.acked,
                    "in_sync": f.node in seq.counted,
                    "lag_rounds": max(0, seq.last_lsn - f.acked),
                    "lag_bytes": seq.bytes_after(f.acked),
                    "lag_s": round(max(0, now_ns - oldest) / 1e9, 3) if oldest else 0.0,
                    "address": f.address}
            out["followers"] = followers
            out["confirmed_lsn"] = seq.confirmed
        client = self.client
        if client is not None:
            behind, lag_s = client.lag()
            out.update({"link": "up" if client.connected else "down",
                        "leader_lsn": client.leader_lsn, "lag_rounds": behind,
                        "lag_s": round(lag_s, 3)})
        return out

    def forward(self, kind: str, fields: dict[str, Any], blob: bytes
                ) -> tuple[dict[str, Any], bytes]:
        """Pass a request on to the leader (a follower's face, for a write) and return its
        reply; ``{"code": 14, ...}`` (unavailable) when no leader can be reached."""
        leader = self.leader
        if leader is None or leader.get("node") == self.node_id:
            return {"code": 14, "message": "no cluster leader is known yet; retry shortly"}, b""
        address = self._repl_address(leader)
        # Bounded: the leader answers within its own confirmation bound, unless it hangs
        # (paused, cut off). An unbounded wait would hold this executor thread, and with it
        # a restart of this process (asyncio waits for its executor's threads), forever.
        timeout = self.config.confirm_timeout_ms / 1000 + FORWARD_MARGIN_S
        # Sent at most once: once the request went out the leader may have applied it, so
        # a broken connection is not retried (a pooled one the leader closed while it sat
        # idle is replaced before anything is sent on it).
        sock = None
        with self._forward_lock:
            idle = self._forward_idle.get(address, [])
            while idle and sock is None:
                sock = idle.pop()
                if not _open(sock):
                    sock.close()
                    sock = None
        try:
            if sock is None:
                sock = connect(address, self.cluster, self.secret)
        except (OSError, ProtocolError) as exc:
            return {"code": 14, "message": f"the leader cannot be reached: {exc}"}, b""
        try:
            sock.settimeout(timeout)
            wire.send(sock, wire.Msg.FORWARD, {**fields, "kind": kind}, blob)
            msg, header, out = wire.recv(sock)
            if msg == wire.Msg.REFUSE:  # turned away before reading the request
                sock.close()
                return {"code": 14, "message": f"the leader refused this node: "
                                               f"{header.get('reason')}"}, b""
            if msg != wire.Msg.FORWARD_REPLY:
                raise ProtocolError(f"expected FORWARD_REPLY, got {msg.name}")
        except TimeoutError:
            sock.close()
            return {"code": 4, "message": f"the leader did not answer within {timeout:g} s; "
                                          "the request may or may not have taken effect"}, b""
        except (OSError, ConnectionError, ProtocolError) as exc:
            sock.close()
            return {"code": 14, "message": f"the connection to the leader failed after the "
                                           f"request was sent ({exc}); it may or may not "
                                           "have taken effect"}, b""
        with self._forward_lock:
            self._forward_idle.setdefault(address, []).append(sock)
        lsn = header.get("lsn")
        if isinstance(lsn, int):
            self.read_own_write(lsn)
        return header, out

    def required(self) -> int:
        """Followers whose acknowledgement a durable write needs."""
        configured = self.config.sync_replicas
        if configured is not None:
            return int(configured)
        return 1 if self.known_nodes - {self.node_id} else 0

    def wait_replicas(self, count: int, timeout_s: float) -> int:
        """For Redis ``WAIT``: followers that acknowledged every round written so far,
        waiting up to ``timeout_s`` for ``count`` of them."""
        seq = self.sequencer
        if seq is None:
            return 0
        target = seq.last_lsn
        deadline = time.monotonic() + timeout_s
        with seq._cv:  # noqa: SLF001
            while True:
                n = sum(1 for f in seq.followers.values() if f.connected and f.acked >= target)
                left = deadline - time.monotonic()
                if n >= count or left <= 0:
                    return n
                seq._cv.wait(left)  # noqa: SLF001

    # -- the control thread -----------------------------------------------------------
    def _run(self) -> None:
        next_renew = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_renew:
                    self._renew()
                    next_renew = now + self.ttl / 3
                self._tick()
            except CoordinationError as exc:
                log.warning("etcd unavailable", reason=str(exc), role=self.role)
                if self.role == "leader" and not self.lease.valid():
                    with self._lock:
                        self._demote("lease lapsed while etcd was unreachable")
            except Exception as exc:  # noqa: BLE001 - the control loop must not die
                log.exception("cluster control loop error", error=repr(exc))
            self._stop.wait(TICK_S)

    def _grant(self) -> None:
        sent = time.monotonic()
        self._lease_id = self.etcd.lease_grant(self.ttl)
        self._renewed_at = sent

    def _renew(self) -> None:
        sent = time.monotonic()
        try:
            self.etcd.lease_keepalive(self._lease_id)
        except LeaseExpired:
            with self._lock:
                if self.role == "leader":
                    self._demote("its etcd lease expired")
            self._grant()
            self._publish()
            return
        self._renewed_at = sent
        if self.role == "leader":
            self.lease.renewed(sent)

    def _read_leader(self) -> tuple[dict[str, Any] | None, int]:
        return _leader_of(self.etcd.get(self.prefix + "leader").first)

    def _tick(self) -> None:
        leader, epoch = self._read_cluster()
        with self._lock:
            if leader is not None:
                self.leader, self.leader_epoch = leader, epoch
                self.state.epoch = max(self.state.epoch, epoch)
            if self.role == "leader":
                if leader is None or epoch != self.sequencer.epoch:  # type: ignore[union-attr]
                    self._demote("the leader key is gone or belongs to another epoch")
                elif not self.lease.valid():
                    self._demote("its lease lapsed (renewals failed)")
                else:
                    self._maintain_sync()
            elif leader is not None and leader.get("node") != self.node_id:
                self._no_leader_since = None
                self._follow(leader, epoch)
            elif leader is None:
                self.leader = None
                self._elect()
        self._publish(when_changed=True)
        self._gauges()

    def _gauges(self) -> None:
        status = self.status()
        EPOCH.set(status["epoch"])
        LSN.set(status["lsn"])
        IS_LEADER.set(1 if status["role"] == "leader" else 0)
        followers = status.get("followers", {})
        IN_SYNC.set(sum(1 for f in followers.values() if f["in_sync"]))
        LAG_S.set(max([f["lag_s"] for f in followers.values()], default=status.get("lag_s", 0)))
        LAG_BYTES.set(max([f["lag_bytes"] for f in followers.values()], default=0))

    def _read_cluster(self) -> tuple[dict[str, Any] | None, int]:
        """Read the cluster's keys (members, nodes, the sync set) in one linearizable
        range; returns the leader key's value and epoch, which the range holds too."""
        keys = cluster_keys(self.etcd.get(self.prefix, prefix=True).kvs, self.prefix)
        self.members, self.known_nodes, self.sync = keys.members, set(keys.nodes), keys.sync
        return _leader_of(keys.leader)

    def _publish(self, *, when_changed: bool = False) -> None:
        """Put this node's member record (``when_changed``: only if its role, epoch or link
        changed, or :data:`PUBLISH_S` passed since the last put)."""
        client = self.client
        link = None if client is None else ("up" if client.connected else "down")
        said = (self.role, self.leader_epoch, link, self._lease_id)
        now = time.monotonic()
        if when_changed and said == self._published and now - self._published_at < PUBLISH_S:
            return
        behind, lag_s = client.lag() if client is not None else (0, 0.0)
        seq = self.sequencer
        value = {"node": self.node_id, "advertise": self.advertise, "ports": self.ports,
                 "role": self.role, "epoch": self.leader_epoch,
                 "lsn": seq.last_lsn if seq is not None else self.state.lsn,
                 "lag_rounds": behind, "lag_s": round(lag_s, 3), "time": time.time(),
                 "pid": os.getpid(),
                 "link": link}
        self.etcd.put(self.prefix + "members/" + self.node_id, json.dumps(value),
                      lease=self._lease_id)
        self._published, self._published_at = said, now

    # -- following ----------------------------------------------------------------------
    def _repl_address(self, leader: dict[str, Any]) -> str:
        return f"{leader['advertise']}:{leader['ports']['replication']}"

    def _follow(self, leader: dict[str, Any], epoch: int) -> None:
        address = self._repl_address(leader)
        client = self.client
        if client is not None and client.address == address and client.failed is None:
            return
        if client is not None:
            client.stop()
            if client.failed is not None:
                return  # a restart for a snapshot is under way
        self.role = "follower"
        self._kept_rounds = []  # this leader streams what it has
        if self._deposed:  # the last chance to see a write that raced the step-down
            self._deposed = False
            if self._count_raced_writes():
                node_state.save(self.dir, self.state)
        self.client = ReplicationClient(
            address=address, cluster=self.cluster, node=self.node_id, state=self.state,
            state_dir=self.dir, appliers={s.name: s.applier for s in self.stores.values()},
            newest_epoch=lambda: self.state.epoch,
            on_snapshot_needed=lambda: self._restart("this node needs the leader's snapshot"),
            ring_bytes=self.ring_bytes, secret=self.secret)
        self.client.start()
        log.info("role: follower", leader=leader.get("node"), epoch=epoch, address=address)

    # -- elections ----------------------------------------------------------------------
    def _stop_following(self) -> None:
        """End the stream from the leader, keeping the rounds it applied (``_kept_rounds``:
        elected, this node serves followers a little behind it from them)."""
        client = self.client
        if client is not None:
            client.stop()
            self._kept_rounds = list(client.ring)
            self.client = None

    def _eligible(self) -> set[str]:
        sync = self.sync
        if self.required() >= 1 and sync.get("leader"):
            return {sync["leader"], *sync.get("members", [])}
        return set(self.members)

    def _elect(self) -> None:
        now = time.monotonic()
        if self._no_leader_since is None:
            self._no_leader_since = now
            self._stop_following()  # our LSN is final from here: publish it
            self.role = "candidate"
            log.info("role: candidate", reason="no leader key", lsn=self.state.lsn)
            return
        eligible = self._eligible()
        if self.node_id not in eligible:
            return
        # A write was acknowledged once ``required()`` members of the sync set had it:
        # perhaps only by members this node cannot see (dead, or not registered again
        # since a restart). While as many are unseen, their LSNs could be the only ones
        # holding acknowledged writes: never campaign past them (safety over
        # availability, as Patroni's synchronous mode).
        need = self.required()
        unseen = sorted(n for n in self.sync.get("members", [])
                        if n != self.node_id and n not in self.members)
        if need >= 1 and len(unseen) >= need:
            if not self._waiting_for_unseen:
                self._waiting_for_unseen = True
                log.warning("not campaigning: sync-set members that may hold acknowledged "
                            "writes are not seen", unseen=unseen, required=need)
            return
        self._waiting_for_unseen = False
        mine = self.state.lsn
        rivals = [(int(m.get("lsn", 0)), node) for node, m in self.members.items()
                  if node in eligible and node != self.node_id]
        waited = now - self._no_leader_since
        # A rival's published LSN is final only once it is a candidate too (it stopped
        # applying): before that it may hold rounds it acknowledged after publishing, and
        # winning over it would give up writes the old leader acknowledged.
        unsettled = [node for node, m in self.members.items()
                     if node in eligible and node != self.node_id
                     and m.get("role") != "candidate"]
        if unsettled and waited < 2 * self.ttl:
            return
        # Furthest ahead wins; on a tie the smaller node id.
        better = [r for r in rivals if r[0] > mine or (r[0] == mine and r[1] < self.node_id)]
        if better and waited < 2 * self.ttl:
            return  # give the one ahead time to win (a dead one's member key expires)
        if any(r[0] > mine for r in rivals):
            return  # never win over a live member that holds more
        self._campaign()

    def _campaign(self) -> None:
        value = {"node": self.node_id, "advertise": self.advertise, "ports": self.ports,
                 "lease": self._lease_id}
        key = self.prefix + "leader"
        res = self.etcd.txn([Compare.create(key, "==", 0)],
                            [Op.put(key, json.dumps(value), lease=self._lease_id)],
                            [Op.get(key)])
        if not res.succeeded:
            return
        self._promote(res.revision)

    def _promote(self, epoch: int) -> None:
        self._stop_following()
        rounds, self._kept_rounds = self._kept_rounds, []
        self.state.begin_epoch(epoch, self.state.lsn + 1)
        if self.state.unsure:
            # Restarted after a crash and not synced with a leader since: the stores may
            # hold rounds past the saved LSN, uncounted. One round of this epoch stands
            # for them, a round no ring holds, so every follower up to here takes this
            # node's snapshot rather than streaming on without what they wrote.
            self.state.lsn += 1
            log.warning("elected while unsure of what the stores hold past the saved "
                        "position: every follower takes this node's snapshot",
                        lsn=self.state.lsn, open_epoch=self.state.unsure)
        self.state.open_epoch, self.state.unsure = epoch, 0
        node_state.save(self.dir, self.state)
        self.lease.renewed(self._renewed_at)  # the txn does not renew the lease
        seq = Sequencer(epoch=epoch, last_lsn=self.state.lsn, lease=self.lease,
                        required=self.required, timeout_s=self.config.confirm_timeout_ms / 1000,
                        ring_bytes=self.ring_bytes)
        seq.adopt(rounds)
        self.sequencer = seq
        for s in self.stores.values():
            s.store.set_replication_hooks(seq.tap(s.name), seq.confirm_later(s.name))
        self.server = ReplicationServer(
            host=self.config.host, port=self.config.replication_port, cluster=self.cluster,
            node=self.node_id, sequencer=seq, history=lambda: self.state.history,
            snapshot=self._snapshot, forward=self.forward_handlers, secret=self.secret,
            protected_mode=self.config.protected_mode)
        self._write_sync(frozenset())
        for s in self.stores.values():
            if s.on_promote is not None:
                threading.Thread(target=self._promoted, args=(s, epoch), daemon=True,
                                 name=f"tuffdb-promote-{s.name}").start()
        self.leader_epoch = epoch
        self.leader = {"node": self.node_id, "advertise": self.advertise, "ports": self.ports}
        self._no_leader_since = None
        self.role = "leader"
        self.failovers += 1
        FAILOVERS.inc()
        log.info("role: leader", epoch=epoch, lsn=self.state.lsn,
                 sync_replicas=self.required(), reason="won the election")

    def _promoted(self, store: Attached, epoch: int) -> None:
        """Run a store's promotion work; its writes need confirmed rounds, so retry while
        followers are not in sync yet, for as long as this epoch lasts."""
        assert store.on_promote is not None
        while not self._stop.is_set():
            seq = self.sequencer
            if seq is None or seq.epoch != epoch:
                return
            try:
                store.on_promote()
                return
            except (NotEnoughReplicasError, NotLeaderError):
                self._stop.wait(0.2)
            except Exception as exc:  # noqa: BLE001 - logged; the node keeps leading
                log.exception("promotion work failed", store=store.name, error=repr(exc))
                return

    def _demote(self, reason: str) -> None:
        seq = self.sequencer
        if seq is None:
            return
        self.role = "follower"
        seq.close()
        for s in self.stores.values():
            s.store.set_replication_hooks(None, None)
        if self.server is not None:
            self.server.close()
            self.server = None
        self.state.lsn = seq.last_lsn
        self._count_raced_writes()
        node_state.save(self.dir, self.state)
        self._deposed = True
        self.sequencer = None
        self.lease.revoke()
        log.warning("role: follower (stepped down)", reason=reason, epoch=seq.epoch,
                    lsn=self.state.lsn)

    def _count_raced_writes(self) -> bool:
        """A write that raced this node's step-down is held here in no round the
        sequence numbered (``KVStore.raced_writes``). Count one more round of the epoch
        this node led: the new leader never had it, so the rejoin takes a snapshot
        instead of keeping a write no other node holds. True when there was one."""
        raced = sum(getattr(s.store, "raced_writes", 0) for s in self.stores.values())
        if raced <= self._raced_seen:
            return False
        self._raced_seen = raced
        self.state.lsn += 1
        log.warning("a write raced the step-down: the rejoin takes a snapshot",
                    raced_writes=raced, lsn=self.state.lsn)
        return True

    # -- the leader's sync set -----------------------------------------------------------
    def _maintain_sync(self) -> None:
        seq = self.sequencer
        assert seq is not None
        self.state.lsn = seq.last_lsn
        counted = set(seq.counted)
        need = self.required()
        with seq._cv:  # noqa: SLF001
            followers = dict(seq.followers)
            confirmed = seq.confirmed
        caught_up = {n for n, f in followers.items() if f.connected and f.acked >= confirmed}
        gone = {n for n in counted if not followers.get(n) or not followers[n].connected}
        new = set(counted) | caught_up
        if gone:
            keep = new - gone
            covering = sum(1 for n in keep if followers[n].acked >= confirmed)
            if covering >= need:
                new = keep
        if new != counted:
            self._write_sync(frozenset(new))

    def _write_sync(self, members: frozenset[str]) -> None:
        seq = self.sequencer
        assert seq is not None
        key = self.prefix + "leader"
        value = {"epoch": seq.epoch, "leader": self.node_id, "members": sorted(members)}
        res = self.etcd.txn([Compare.create(key, "==", seq.epoch)],
                            [Op.put(self.prefix + "sync", json.dumps(value))])
        if not res.succeeded:
            self._demote("the leader key changed hands while publishing the sync set")
            return
        # Counted only once published: a node promoted later sees the set its acks came from.
        seq.set_counted(members)
        self.sync = value
        log.info("sync set", members=sorted(members), epoch=seq.epoch)

    # -- snapshots for followers ---------------------------------------------------------
    def _snapshot(self) -> tuple[int, list[SnapshotFile], Callable[[], None]]:
        seq = self.sequencer
        if seq is None:
            raise ProtocolError("no longer the leader")
        staging = Path(tempfile.mkdtemp(prefix="snapshot-", dir=self.dir))
        files: list[SnapshotFile] = []
        # Every round up to ``lsn`` is durable before the stores' snapshots are taken (a KV
        # round is tapped before its fsync, but a snapshot's pause waits for the round in
        # flight to end), so each snapshot holds it; a round after ``lsn`` may
        # be in a snapshot too, and is applied again from the stream: the stores' apply
        # paths leave the same state when a round is applied twice (appliers.py).
        lsn = seq.last_lsn
        try:
            for s in self.stores.values():
                snap = s.store.shipper.snapshot(staging / s.name)
                for name, size, _kind in snap.files:
                    files.append(SnapshotFile(s.name, name, size, _reader(snap.path(name))))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return lsn, files, lambda: shutil.rmtree(staging, ignore_errors=True)


def _open(sock: socket.socket) -> bool:
    """Whether a pooled connection is still open: no end of stream (nor stray bytes)
    waiting on it."""
    timeout = sock.gettimeout()
    try:
        sock.setblocking(False)  # (with a timeout set, recv would wait for data)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True  # nothing to read: open
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)
    return False  # the end of the stream, or bytes nobody asked for


def _reader(path: Path) -> Callable[[int, int], bytes]:
    def read(offset: int, length: int) -> bytes:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read(length)

    return read


def _refuse_writes(store: Attached) -> None:
    """A follower's store changes only by the leader's log: a write that reaches it by
    another path (a face that forgot to check its role) fails instead of diverging."""
    store.store.refuse_writes(NotLeaderError(
        "this node is a follower: writes go to the cluster's leader"))


def _leader_of(kv: Any) -> tuple[dict[str, Any] | None, int]:
    """The leader key's value and epoch (its ``create_revision``); (None, 0) if absent."""
    if kv is None:
        return None, 0
    try:
        return json.loads(kv.value), kv.create_revision
    except ValueError:
        return {"node": "?"}, kv.create_revision
