"""Replication as Redis clients see it: ROLE, WAIT, INFO replication and SENTINEL.

Without ``--cluster`` a node is a master with no replicas. In a cluster (docs/design/
replication.md) the leader is the master and followers are replicas; offsets are the
node's LSN (one counter over every store's commit rounds). Every node answers the
Sentinel commands itself, from what etcd says (Redis Enterprise's discovery service does
the same), with the cluster's name as the master's name, so an unchanged redis-py
``Sentinel([...]).master_for(NAME)`` finds the leader and follows a failover: it reads
``SENTINEL MASTERS`` for the master's address and drops a connection that answers
``-READONLY``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp import reply
from tuffdb.server.resp.table import CommandError, command
from tuffdb.server.resp.commands.common import to_int

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

READONLY = "READONLY You can't write against a read only replica."
NOREPLICAS = "NOREPLICAS Not enough good replicas to write."


def _node(c: Conn) -> Any:
    return c.srv.node


def _host_port(member: dict[str, Any]) -> tuple[str, int]:
    return str(member.get("advertise", "")), int(member.get("ports", {}).get("resp") or 0)


@command("readonly", 1, "loading stale fast", group="cluster", since="3.0.0")
def readonly(c: Conn, a: list[bytes]) -> bytes:
    """Redis Cluster's read-from-replica switch (followers serve reads here anyway)."""
    raise CommandError("ERR This instance has cluster support disabled")


@command("readwrite", 1, "loading stale fast", group="cluster", since="3.0.0")
def readwrite(c: Conn, a: list[bytes]) -> bytes:
    """Redis Cluster's READONLY undone."""
    raise CommandError("ERR This instance has cluster support disabled")


def _replicaof(c: Conn, a: list[bytes]) -> bytes:
    if a[1].lower() == b"no" and a[2].lower() == b"one":
        return reply.OK  # already its own master (or a cluster node: etcd decides)
    raise CommandError("ERR REPLICAOF is not offered: tuffdb replicates through its own "
                       "cluster (tuffdb serve --cluster NAME --etcd URL), leadership in etcd")


@command("replicaof", 3, "admin noscript stale", group="server", since="5.0.0")
def replicaof(c: Conn, a: list[bytes]) -> bytes:
    """REPLICAOF NO ONE (already so); following a Redis master is not offered."""
    return _replicaof(c, a)


@command("slaveof", 3, "admin noscript stale", group="server", since="1.0.0")
def slaveof(c: Conn, a: list[bytes]) -> bytes:
    """REPLICAOF under its old name."""
    return _replicaof(c, a)


@command("role", 1, "noscript loading stale fast", group="server", since="2.8.12")
def role(c: Conn, a: list[bytes]) -> bytes:
    """master: [master, offset, [[ip, port, offset], ...]]; replica: [slave, ip, port,
    state, offset]."""
    node = _node(c)
    if node is None:
        return reply.array([reply.bulk(b"master"), reply.integer(0), reply.EMPTY_ARRAY])
    status = node.status()
    if node.is_leader():  # the lease is valid too: a master's reads are current
        rows = []
        for name, f in sorted(status.get("followers", {}).items()):
            host, port = _host_port(node.members.get(name, {}))
            rows.append(reply.array([reply.bulk(host.encode()), reply.bulk(str(port).encode()),
                                     reply.bulk(str(f["acked_lsn"]).encode())]))
        return reply.array([reply.bulk(b"master"), reply.integer(status["lsn"]),
                            reply.array(rows)])
    leader = node.leader or {}
    host, port = _host_port(leader)
    link = status.get("link")
    state = {"up": "connected", "down": "connecting"}.get(link or "", "connect")
    return reply.array([reply.bulk(b"slave"), reply.bulk(host.encode()), reply.integer(port),
                        reply.bulk(state.encode()), reply.integer(status["lsn"])])


def replication_section(c: Conn) -> list[tuple[str, object]]:
    """INFO's ``replication`` section with Redis's field names."""
    node = _node(c)
    if node is None:
        return [("role", "master"), ("connected_slaves", 0), ("master_repl_offset", 0)]
    status = node.status()
    replid = f"{node.cluster}-{status['epoch']}".encode().hex()[:40].ljust(40, "0")
    if node.is_leader():
        followers = status.get("followers", {})
        fields: list[tuple[str, object]] = [
            ("role", "master"),
            ("connected_slaves", sum(1 for f in followers.values() if f["connected"]))]
        for i, (name, f) in enumerate(sorted(followers.items())):
            host, port = _host_port(node.members.get(name, {}))
            state = "online" if f["connected"] else "wait_bgsave"
            fields.append((f"slave{i}", f"ip={host},port={port},state={state},"
                                        f"offset={f['acked_lsn']},lag={int(f['lag_s'])}"))
        fields += [("master_failover_state", "no-failover"), ("master_replid", replid),
                   ("master_repl_offset", status["lsn"]),
                   ("tuffdb_epoch", status["epoch"]),
                   ("tuffdb_sync_replicas", status["sync_replicas"])]
        return fields
    leader = node.leader or {}
    host, port = _host_port(leader)
    link = "up" if status.get("link") == "up" else "down"
    return [("role", "slave"), ("master_host", host), ("master_port", port),
            ("master_link_status", link),
            ("master_last_io_seconds_ago", int(status.get("lag_s", 0))),
            ("master_sync_in_progress", 0), ("slave_repl_offset", status["lsn"]),
            ("slave_priority", 100), ("slave_read_only", 1), ("replica_announced", 1),
            ("connected_slaves", 0), ("master_replid", replid),
            ("master_repl_offset", status.get("leader_lsn", status["lsn"])),
            ("tuffdb_epoch", status["epoch"])]


@command("wait", 3, "noscript", group="generic", since="3.0.0")
def wait(c: Conn, a: list[bytes]) -> bytes:
    """Block until ``numreplicas`` followers hold every write so far, or ``timeout`` ms
    pass (0: forever); returns how many do."""
    want = to_int(a[1])
    timeout = to_int(a[2])
    if timeout < 0:
        raise CommandError("ERR timeout is negative")
    node = _node(c)
    if node is None or node.sequencer is None:
        return reply.ZERO
    seconds = timeout / 1000 if timeout else 365 * 86400.0
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(
        None, lambda: reply.integer(node.wait_replicas(max(want, 0), seconds)))
    c.defer(fut)
    c.late.append(fut)
    return b""


def _flags(role: str, alive: bool) -> str:
    base = "master" if role == "leader" else "slave"
    return base if alive else base + ",s_down"


def _master_fields(node: Any) -> list[tuple[str, object]] | None:
    leader = node.leader
    if leader is None:
        return None
    host, port = _host_port(leader)
    followers = [m for n, m in node.members.items()
                 if n != leader.get("node") and m.get("role") == "follower"]
    sentinels = len(node.members)
    return [("name", node.cluster), ("ip", host), ("port", port),
            ("runid", str(leader.get("node", ""))), ("flags", "master"),
            ("link-pending-commands", 0), ("link-refcount", 1), ("last-ping-sent", 0),
            ("last-ok-ping-reply", 0), ("last-ping-reply", 0), ("down-after-milliseconds",
                                                                  node.ttl * 1000),
            ("info-refresh", 0), ("role-reported", "master"), ("role-reported-time", 0),
            ("config-epoch", node.leader_epoch), ("num-slaves", len(followers)),
            ("num-other-sentinels", max(0, sentinels - 1)), ("quorum", 1),
            ("failover-timeout", node.ttl * 2000), ("parallel-syncs", 1)]


def _flat(fields: list[tuple[str, object]], enc: Any) -> bytes:
    result: bytes = enc.map([(reply.bulk(k.encode()), reply.bulk(str(v).encode()))
                             for k, v in fields])
    return result


@command("sentinel", -2, "admin noscript loading stale", group="sentinel", since="2.8.4")
def sentinel(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911 - one branch per subcommand
    """SENTINEL MASTERS | MASTER | GET-MASTER-ADDR-BY-NAME | SLAVES | REPLICAS | SENTINELS."""
    node = _node(c)
    sub = a[1].lower()
    if node is None:
        raise CommandError("ERR This instance is not in a cluster: SENTINEL needs --cluster")
    name = a[2].decode("utf-8", "replace") if len(a) > 2 else None
    if sub in (b"masters",):
        fields = _master_fields(node)
        return reply.array([] if fields is None else [_flat(fields, c.enc)])
    if name is not None and name != node.cluster and sub != b"masters":
        if sub == b"get-master-addr-by-name":
            return c.enc.null_array
        raise CommandError("ERR No such master with that name")
    if sub == b"master" and name is not None:
        fields = _master_fields(node)
        if fields is None:
            raise CommandError("ERR No such master with that name")
        return _flat(fields, c.enc)
    if sub == b"get-master-addr-by-name" and name is not None:
        leader = node.leader
        if leader is None:
            return c.enc.null_array
        host, port = _host_port(leader)
        return reply.array([reply.bulk(host.encode()), reply.bulk(str(port).encode())])
    if sub in (b"slaves", b"replicas") and name is not None:
        leader_node = (node.leader or {}).get("node")
        out = []
        for member, m in sorted(node.members.items()):
            if member == leader_node:
                continue
            host, port = _host_port(m)
            out.append(_flat([("name", f"{host}:{port}"), ("ip", host), ("port", port),
                              ("runid", member), ("flags", _flags("follower", True)),
                              ("master-link-status", "ok" if m.get("link") == "up" else "err"),
                              ("master-host", (node.leader or {}).get("advertise", "")),
                              ("slave-repl-offset", m.get("lsn", 0))], c.enc))
        return reply.array(out)
    if sub == b"sentinels" and name is not None:
        out = []
        for member, m in sorted(node.members.items()):
            if member == node.node_id:
                continue
            host, port = _host_port(m)
            out.append(_flat([("name", member), ("ip", host), ("port", port),
                              ("runid", member), ("flags", "sentinel")], c.enc))
        return reply.array(out)
    raise CommandError(f"ERR Unknown sentinel subcommand '{a[1].decode('utf-8', 'replace')}'")
