"""Faults under load on all three faces at once; every operation recorded and checked.

Three ``tuffdb serve --cluster`` nodes (``--sync-replicas`` default: 1) and one private
etcd, each node reaching etcd through a proxy of its own (so it can be cut off alone).
While clients write and read on every face, the nemesis, in turn: SIGKILLs the leader
(twice), SIGSTOPs it past its lease and resumes it, kills a follower and brings it back,
SIGKILLs etcd and restarts it, and cuts the leader off from etcd and heals it. Clients:

- RESP registers: SET/GET of five keys through whichever node is the leader. A GET counts
  only if the node still says ``role:master`` right after (a master's lease is valid, so
  its reads are current); the per-key histories are checked for linearizability
  (Wing-Gong-Lowe, ``tuffdb.testing.checker``, itself tested on known-bad histories);
- UmaDB appends through any node (followers forward): each claims one of 20 names with a
  DCB condition "no event with this tag yet": the final log is checked as a list: every
  acknowledged append present once, positions gapless, no acknowledged condition false;
- ekoDB inserts through any node (``durable_operations``): every acknowledged one present.

Afterwards every node holds the same data (a digest per face).
"""

from __future__ import annotations

import contextlib
import os
import sys
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import umadb
from redis.backoff import NoBackoff
from redis.retry import Retry
from cluster_faults import LinkProxy

from tuffdb.testing.checker import Append, History, LogEntry, check_log, check_registers, dcb_condition
from tuffdb.testing.cluster import ServerNode, until
from tuffdb.testing.etcd import EtcdCluster

pytestmark = pytest.mark.once

KEYS = [f"r{i}" for i in range(5)]
CLAIMS = 3


class Harness:
    def __init__(self, root: Path, etcd: EtcdCluster) -> None:
        self.etcd = etcd
        host, port = etcd.endpoints[0].removeprefix("http://").rsplit(":", 1)
        self.proxies = [LinkProxy((host, int(port))) for _ in range(3)]
        toml = root / "serve.toml"
        root.mkdir(parents=True, exist_ok=True)
        toml.write_text("[http]\ndurable_operations = true\n")
        self.nodes = [
            ServerNode(root, f"n{i + 1}", "http://{}:{}".format(*self.proxies[i].address),
                       cluster="hist", extra=["--config", str(toml)])
            for i in range(3)]
        self.history = History()
        self.stop = threading.Event()
        self.docs_acked: set[str] = set()
        self.paused: set[str] = set()
        self.op_nodes: dict[int, str] = {}  # which node answered each RESP op (diagnostics)  # clients pick other nodes (a real one would time out)
        self.token: str | None = None
        self.threads: list[threading.Thread] = []
        # Made once every node serves, before any fault: a umadb client made after this
        # process reaps a child fails its first call (a quirk of the client's signals).
        self.umadb: dict[str, umadb.Client] = {}

    def leader(self, exclude: ServerNode | None = None) -> ServerNode:
        def find() -> ServerNode | None:
            found = [n for n in self.nodes if n is not exclude and n.alive and n.role() == "leader"]
            return found[0] if len(found) == 1 else None
        return until("one leader", find)

    def in_sync(self, leader: ServerNode, count: int = 2) -> None:
        def check() -> bool:
            followers = leader.health().get("cluster", {}).get("followers", {})
            return sum(1 for f in followers.values() if f["in_sync"] and f["connected"]) >= count
        try:
            until(f"{count} followers in sync", check)
        except AssertionError as exc:
            logs = {n.node_id: [(line.get("event"), line.get("reason") or line.get("error")
                                 or line.get("raw", "")[:200])
                                for line in n.drain()[-25:]] for n in self.nodes}
            dumps = ""
            if os.environ.get("TUFFDB_DEBUG_DUMP"):
                import subprocess  # noqa: PLC0415 - debugging only
                spy = Path(sys.executable).with_name("py-spy")
                if not spy.exists():  # not in the test extra: say so, keep the assertion
                    dumps = f"no py-spy at {spy}: pip install py-spy for thread dumps\n"
                for n in self.nodes:
                    if n.alive and spy.exists():
                        dumps += f"\n==== {n.node_id}\n" + subprocess.run(
                            [str(spy), "dump", "--pid", str(n.proc.pid)], capture_output=True,
                            text=True, check=False).stdout
                Path(os.environ["TUFFDB_DEBUG_DUMP"]).write_text(dumps)
            raise AssertionError(f"{exc}; nodes: {self.roles()}; logs: {logs}") from None

    # -- clients ------------------------------------------------------------------------
    def _resp(self, proc: int) -> None:
        rnd = random.Random(proc)
        conn: redis.Redis | None = None
        while not self.stop.is_set():
            if conn is None:
                node = rnd.choice(self.live())
                # No retries, bounded waits: a paused node costs this client 5 s, once.
                conn = redis.Redis(*node.resp, socket_timeout=5, socket_connect_timeout=5,
                                   retry=Retry(NoBackoff(), 0))
            key = rnd.choice(KEYS)
            try:
                if rnd.random() < 0.5:
                    value = f"{proc}-{uuid.uuid4().hex[:8]}"
                    op = self.history.invoke(proc, "write", key, value)
                    self.op_nodes[op.id] = f"{node.node_id}:{conn.connection_pool.connection_kwargs['port']}"
                    try:
                        conn.set(key, value)
                    except redis.exceptions.ReadOnlyError as exc:
                        self.history.fail(op, exc)  # refused before any effect
                        conn = None
                        continue
                    except redis.exceptions.RedisError as exc:
                        self.history.info(op, exc)
                        conn = None
                        continue
                    self.history.ok(op)
                else:
                    op = self.history.invoke(proc, "read", key)
                    self.op_nodes[op.id] = f"{node.node_id}:{conn.connection_pool.connection_kwargs['port']}"
                    try:
                        value = conn.get(key)
                        role = conn.info("replication")["role"]
                    except redis.exceptions.RedisError as exc:
                        self.history.fail(op, exc)  # a read changes nothing
                        conn = None
                        continue
                    if role == "master":
                        self.history.ok(op, None if value is None else value.decode())
                    else:
                        self.history.fail(op, "not the leader: a replica's read is not checked")
                        conn = None
            except OSError:
                conn = None

    def _events(self, proc: int) -> None:
        rnd = random.Random(100 + proc)
        while not self.stop.is_set():
            node = rnd.choice(self.live())
            # Three names a second, raced for by both threads: conditions do fail.
            claim = f"claim:{int(time.monotonic())}:{rnd.randrange(CLAIMS)}"
            eid = uuid.uuid4().hex
            cond = umadb.AppendCondition(
                fail_if_events_match=umadb.Query(items=[umadb.QueryItem(tags=[claim])]), after=0)
            op = self.history.invoke(f"e{proc}", "append", claim,
                                     Append((eid,), dcb_condition([((), (claim,))])))
            try:
                pos = self.umadb[node.node_id].append(
                    [umadb.Event(event_type="Claimed", data=eid.encode(), tags=[claim])],
                    condition=cond)
            except umadb.IntegrityError as exc:
                self.history.fail(op, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - unknown outcome
                self.history.info(op, exc)
                continue
            self.history.ok(op, pos)

    def _docs(self) -> None:
        rnd = random.Random(7)
        i = 0
        while not self.stop.is_set():
            node = rnd.choice(self.live())
            try:
                r = httpx.post(f"{node.http_url}/api/insert/items", json={"n": i},
                               headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                self.docs_acked.add(r.json()["id"])
            i += 1

    def live(self) -> list[ServerNode]:
        return [n for n in self.nodes if n.alive and n.node_id not in self.paused]

    def start_clients(self) -> None:
        self.threads = [threading.Thread(target=self._resp, args=(p,)) for p in range(3)]
        self.threads += [threading.Thread(target=self._events, args=(p,)) for p in range(2)]
        self.threads.append(threading.Thread(target=self._docs))
        for t in self.threads:
            t.start()

    def stop_clients(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self.threads)

    def progress(self, phase: str, n: int = 20) -> None:
        """Wait until clients got ``n`` more acknowledgements (the cluster is serving)."""
        start = sum(1 for op in self.history.operations() if op.outcome == "ok")
        def done() -> bool:
            return sum(1 for op in self.history.operations() if op.outcome == "ok") >= start + n
        try:
            until(f"{n} more acknowledged operations {phase}", done)
        except AssertionError as exc:
            counts = Counter((o.f, o.outcome) for o in self.history.operations())
            errors = Counter((o.f, (o.error or "")[:50]) for o in self.history.operations()[-300:]
                             if o.outcome != "ok")
            logs = {node.node_id: {"exit": node.proc.poll() if node.proc else None,
                                   "log": [(e.get("event"), e.get("level"), e.get("error") or
                                            e.get("reason") or e.get("raw"))
                                           for e in node.drain()[-8:]]}
                    for node in self.nodes}
            raise AssertionError(f"{exc}; nodes: {self.roles()}; outcomes: {dict(counts)}; "
                                 f"recent errors: {dict(errors)}; node logs: {logs}") from None

    def roles(self) -> dict[str, Any]:
        out = {}
        for n in self.nodes:
            try:
                c = n.health().get("cluster", {})
                fds = len(os.listdir(f"/proc/{n.proc.pid}/fd")) if n.proc else None
                out[n.node_id] = (fds, c.get("role"), c.get("lsn"), c.get("link"), c.get("lease_valid"),
                                  {f: (v["connected"], v["in_sync"], v["acked_lsn"])
                                   for f, v in c.get("followers", {}).items()})
            except Exception as exc:  # noqa: BLE001 - a report, not a check
                out[n.node_id] = repr(exc)[:60]
        return out


@pytest.fixture
def harness(tmp_path: Path, etcd_factory: Any) -> Iterator[Harness]:
    h = Harness(tmp_path / "nodes", etcd_factory())
    for node in h.nodes:
        node.start()
    try:
        yield h
    finally:
        h.stop.set()
        for node in h.nodes:
            with contextlib.suppress(Exception):
                node.stop()
        for proxy in h.proxies:
            proxy.close()


def test_no_acknowledged_write_is_lost_through_kills_pauses_and_partitions(
        harness: Harness) -> None:
    h = harness
    leader = h.leader()
    h.in_sync(leader)
    h.umadb.update({n.node_id: umadb.Client(url=n.grpc_url) for n in h.nodes})
    token = httpx.post(f"{leader.http_url}/api/auth/token", json={"api_key": leader.admin_key()},
                       timeout=30)
    h.token = token.json()["token"]
    h.start_clients()
    h.progress("at the start")

    for _ in range(2):  # the leader killed, then back as a follower
        old = h.leader()
        old.kill()
        new = h.leader(exclude=old)
        h.progress("after the leader was killed")
        old.start()
        h.in_sync(new)

    old = h.leader()  # paused past its lease, then resumed
    h.paused.add(old.node_id)
    old.signal(signal.SIGSTOP)
    new = h.leader(exclude=old)
    h.progress("while the old leader is paused")
    old.signal(signal.SIGCONT)
    h.paused.discard(old.node_id)
    h.in_sync(new)

    leader = h.leader()  # a follower killed while writes go on
    follower = next(n for n in h.nodes if n is not leader)
    follower.kill()
    h.progress("without a follower", 40)
    follower.start()
    h.in_sync(leader)

    member = h.etcd.members[0]  # etcd killed and restarted
    member.kill()
    member.restart()
    leader = h.leader()
    h.in_sync(leader)
    h.progress("after etcd restarted")

    index = h.nodes.index(leader)  # the leader cut off from etcd, then healed
    h.proxies[index].cut()
    new = h.leader(exclude=leader)
    h.progress("with the old leader cut off from etcd")
    h.proxies[index].heal()
    h.in_sync(new)
    h.progress("after healing")

    h.stop_clients()
    final = h.leader()
    h.in_sync(final)
    ops = h.history.operations()

    bad = {k: r for k, r in check_registers([o for o in ops if o.f in ("read", "write")]).items()
           if not r}
    if bad and os.environ.get("TUFFDB_DEBUG_DUMP"):
        h.history.save(Path(os.environ["TUFFDB_DEBUG_DUMP"] + ".history.json"))
        Path(os.environ["TUFFDB_DEBUG_DUMP"] + ".nodes.json").write_text(repr(h.op_nodes))
    assert bad == {}, f"non-linearizable registers: {bad}"

    client = h.umadb[final.node_id]
    log = [LogEntry(e.position, e.event.data.decode(), e.event.event_type,
                    frozenset(e.event.tags)) for e in client.read(umadb.Query(items=[]))]
    result = check_log([o for o in ops if o.f == "append"], log)
    assert result, result.errors[:10]
    assert sum(1 for o in ops if o.f == "append" and o.outcome == "ok") > 0

    hdr = {"Authorization": f"Bearer {h.token}"}
    present = {r["id"] for r in httpx.post(f"{final.http_url}/api/find/items", json={},
                                           headers=hdr, timeout=60).json()}
    assert h.docs_acked and h.docs_acked <= present

    def digest(node: ServerNode) -> tuple[Any, ...]:
        r = redis.Redis(*node.resp)
        keys = {k: r.get(k) for k in r.scan_iter(count=1000)}
        events = [(e.position, e.event.data) for e in h.umadb[node.node_id].read(
            umadb.Query(items=[]))]
        docs = {d["id"] for d in httpx.post(f"{node.http_url}/api/find/items", json={},
                                            headers=hdr, timeout=60).json()}
        return keys, events, docs

    want = digest(final)
    for node in h.nodes:
        until(f"{node.node_id} to converge", lambda node=node: digest(node) == want)
