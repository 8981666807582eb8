"""Three real ``tuffdb serve --cluster`` nodes and a private etcd: every face, through
real clients, on the leader and on followers; then the leader is killed.

What must hold: with ``--sync-replicas`` at its default (1 once there are followers) a
durable write acknowledged by the leader is already on a follower when it returns; a
follower refuses RESP writes with Redis's READONLY, and forwards UmaDB appends and ekoDB
writes to the leader, answering as the leader did; redis-py's Sentinel client finds the
leader through any node and follows a failover; after the leader's SIGKILL a new leader
holds every acknowledged write.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import umadb
from redis.sentinel import Sentinel
from websockets.asyncio.client import connect
from tuffdb.testing.cluster import ServerCluster, until

from tuffdb.testing.etcd import EtcdCluster

pytestmark = pytest.mark.once


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdCluster) -> Iterator[ServerCluster]:
    c = ServerCluster(tmp_path / "nodes", etcd.endpoint_list, size=3,
                      cluster=f"faces{id(tmp_path) % 100000}").start()
    try:
        yield c
    finally:
        c.stop()


async def _ws_writes(http_url: str, token: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Over one WebSocket session: insert a user, read it back, then insert into a
    collection whose schema refuses the record. Returns (id, the record read, the reply
    to the refused insert)."""
    async with connect(http_url.replace("http://", "ws://") + "/api/ws",
                       additional_headers={"Authorization": f"Bearer {token}"}) as ws:

        async def call(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
            await ws.send(json.dumps({"type": kind, "messageId": kind, "payload": payload}))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert reply.get("messageId") == kind, reply
            return dict(reply)

        made = await call("Insert", {"collection": "users", "record": {"name": "Grace"}})
        assert made["type"] == "Success", made
        rid = made["payload"]["data"]["id"]
        read = await call("FindById", {"collection": "users", "id": rid})
        assert read["type"] == "Success", read
        schema = {"fields": {"n": {"field_type": "Integer", "required": True}}}
        created = await call("CreateCollection", {"collection": "strict", "schema": schema})
        assert created["type"] == "Success", created
        refused = await call("Insert", {"collection": "strict", "record": {"m": 1}})
        return rid, read["payload"]["data"], refused


def _token(base: str, api_key: str) -> str:
    r = httpx.post(f"{base}/api/auth/token", json={"api_key": api_key}, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["token"])


def test_every_face_on_a_cluster_and_a_leader_killed(cluster: ServerCluster) -> None:
    leader = cluster.leader()
    cluster.in_sync(leader, 2)
    f1, f2 = cluster.followers(leader)

    # RESP: acknowledged on the leader = already on the followers (sync replication).
    lr = redis.Redis(*leader.resp)
    fr = redis.Redis(*f1.resp)
    acked = {}
    for i in range(40):
        assert lr.set(f"k{i}", f"v{i}")
        acked[f"k{i}"] = f"v{i}"
        assert fr.get(f"k{i}") == f"v{i}".encode() or redis.Redis(*f2.resp).get(f"k{i}") == \
            f"v{i}".encode()
    with pytest.raises(redis.exceptions.ReadOnlyError):
        fr.set("on-a-follower", "x")
    pipe = fr.pipeline(transaction=False)  # a pipeline of one command runs as a batch
    for i in range(4):
        pipe.set(f"pipelined-{i}", "x")
    refused = pipe.execute(raise_on_error=False)
    assert [type(r) for r in refused] == [redis.exceptions.ReadOnlyError] * 4
    assert fr.ping()
    assert lr.execute_command("ROLE")[0] == b"master"
    assert fr.execute_command("ROLE")[0] == b"slave"
    assert fr.info("replication")["role"] == "slave"
    assert lr.info("replication")["connected_slaves"] == 2
    assert lr.execute_command("WAIT", 2, 5000) == 2

    # Sentinel, asked through a follower, finds the leader.
    sentinel = Sentinel([f1.resp], socket_timeout=5)
    master = sentinel.master_for(cluster.nodes[0].cluster, socket_timeout=5)
    assert master.set("via-sentinel", "1")
    acked["via-sentinel"] = "1"

    # UmaDB: an append sent to a follower is forwarded and answered as the leader would,
    # once that follower applied it (the writer reads its write there).
    uc = umadb.Client(url=f1.grpc_url)
    pos = uc.append([umadb.Event(event_type="Made", data=b"e1", tags=["t:1"])])
    assert pos == 1
    assert [e.position for e in uc.read(umadb.Query(items=[umadb.QueryItem(tags=["t:1"])]))] \
        == [1]
    cond = umadb.AppendCondition(
        fail_if_events_match=umadb.Query(items=[umadb.QueryItem(tags=["t:1"])]), after=0)
    with pytest.raises(umadb.IntegrityError):
        uc.append([umadb.Event(event_type="Made", data=b"e2", tags=["t:1"])], condition=cond)

    # ekoDB: a write through a follower lands on the leader and is readable everywhere.
    token = _token(f2.http_url, leader.admin_key())
    hdr = {"Authorization": f"Bearer {token}"}
    r = httpx.post(f"{f2.http_url}/api/insert/users", json={"name": "Ada"}, headers=hdr,
                   timeout=30)
    assert r.status_code == 200, r.text
    uid = r.json()["id"]
    for node in (f2, leader):  # the writer reads its write through the node it wrote to
        got = httpx.get(f"{node.http_url}/api/find/users/{uid}", headers=hdr, timeout=30)
        assert got.status_code == 200, (node.node_id, got.text)
        assert got.json()["name"]["value"] == "Ada"
    # A record whose TTL each read extends: a follower serves the read (only the leader's
    # reads extend it; the follower's store changes only by the leader's log).
    r = httpx.post(f"{f2.http_url}/api/insert/sessions",
                   json={"user": "Ada", "ttl": 3600, "ttl_update_on_access": True},
                   headers=hdr, timeout=30)
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    for node in (f2, leader, f2):
        got = httpx.get(f"{node.http_url}/api/find/sessions/{sid}", headers=hdr, timeout=30)
        assert got.status_code == 200, (node.node_id, got.text)
        assert got.json()["user"]["value"] == "Ada"
    # A WebSocket write through a follower goes to the leader too (answered as REST is),
    # and the writer reads it through the follower at once; a refused one carries the
    # leader's error.
    ws_id, ws_read, ws_dup = asyncio.run(_ws_writes(f2.http_url, token))
    assert ws_read["name"]["value"] == "Grace"
    assert ws_dup["type"] == "Error" and ws_dup["code"] == 400, ws_dup
    got = httpx.get(f"{leader.http_url}/api/find/users/{ws_id}", headers=hdr, timeout=30)
    assert got.status_code == 200 and got.json()["name"]["value"] == "Grace", got.text

    # The leader dies: a follower takes over with every acknowledged write. (The umadb
    # clients are made first: one made after this process reaps a child fails its first
    # read with CancelledByUserError, a quirk of the client's signal handling.)
    clients = {n.node_id: umadb.Client(url=n.grpc_url) for n in cluster.nodes}
    leader.kill()
    new = cluster.leader(exclude=leader)
    nr = redis.Redis(*new.resp)
    assert {k: nr.get(k) for k in acked} == {k: v.encode() for k, v in acked.items()}
    assert until("a write through Sentinel after the failover",
                 lambda: _sentinel_write(sentinel, cluster.nodes[0].cluster))
    assert [e.position for e in clients[new.node_id].read(
        umadb.Query(items=[umadb.QueryItem(tags=["t:1"])]))] == [1]


def _sentinel_write(sentinel: Sentinel, name: str) -> bool:
    try:
        return bool(sentinel.master_for(name, socket_timeout=5).set("after-failover", "1"))
    except (redis.exceptions.ConnectionError, redis.exceptions.ReadOnlyError,
            redis.exceptions.ResponseError):
        return False


def test_follower_subscriptions_and_recorders_carry_on_across_a_failover(
        cluster: ServerCluster, etcd: EtcdCluster) -> None:
    """A subscription on a follower keeps delivering, in order, without gaps or
    duplicates, while the leader is killed and another takes over; eventsourcing's DCB
    recorder (over the real umadb client) keeps working against that follower's address;
    ``tuffdb cluster status`` and ``/metrics`` tell the story."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
    from eventsourcing.dcb.api import DCBAppendCondition, DCBEvent, DCBQuery, DCBQueryItem
    from test_eventsourcing_umadb_wire import UmaDBClientRecorder

    leader = cluster.leader()
    cluster.in_sync(leader, 2)
    follower = cluster.followers(leader)[0]
    clients = {n.node_id: umadb.Client(url=n.grpc_url) for n in cluster.nodes}  # before kills
    recorder = UmaDBClientRecorder(clients[follower.node_id])
    seen: list[int] = []
    done = threading.Event()
    errors: list[BaseException] = []
    sub_client = umadb.Client(url=follower.grpc_url)

    def subscribe() -> None:
        try:
            for e in sub_client.subscribe(after=0):
                seen.append(e.position)
                if len(seen) == 60:
                    done.set()
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
            done.set()

    sub = threading.Thread(target=subscribe, daemon=True)
    sub.start()
    q = DCBQuery([DCBQueryItem(types=["Made"], tags=["order:1"])])
    for i in range(30):
        recorder.append([DCBEvent("Made" if i == 0 else "Changed", b"%d" % i, ["order:1"])],
                        DCBAppendCondition(q, after=None) if i == 0 else None)
    leader.kill()
    new = cluster.leader(exclude=leader)
    cluster.in_sync(new, 1)
    for i in range(30, 60):
        until("an append through the follower after the failover",
              lambda i=i: _append(recorder, i))
    assert done.wait(60), f"the subscription stopped at {seen[-3:]}"
    assert errors == []
    assert seen == list(range(1, 61))
    with pytest.raises(Exception, match="ntegrity"):  # Made already happened for order:1
        recorder.append([DCBEvent("Made", b"again", ["order:1"])], DCBAppendCondition(q, None))

    out = subprocess.run([sys.executable, "-m", "tuffdb", "cluster", "status", "--etcd",
                          etcd.endpoint_list, "--cluster", cluster.nodes[0].cluster, "--json"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    status = json.loads(out)
    assert status["leader"] == new.node_id
    rows = {r["node"]: r for r in status["nodes"]}
    assert rows[leader.node_id]["role"] == "down"
    assert rows[new.node_id]["role"] == "leader"
    metrics = httpx.get(f"http://{new.host}:{new.ports['admin']}/metrics", timeout=30).text
    assert "tuffdb_cluster_is_leader 1" in metrics
    assert "tuffdb_cluster_failovers_total 1" in metrics


def _append(recorder: object, i: int) -> bool:
    from eventsourcing.dcb.api import DCBEvent

    try:
        recorder.append([DCBEvent("Changed", b"%d" % i, ["order:1"])])  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the cluster is changing leader: try again
        return False
    return True
