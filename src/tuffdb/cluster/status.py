"""``tuffdb cluster status``: every node of a cluster as etcd and the nodes report it.

Reads ``/tuffdb/<cluster>/`` once (linearizable): the leader key (its node and epoch), the
sync set, each live member's published state (role, epoch, durable LSN, lag, link to the
leader) and the registry of every node that ever joined (a registered node with no
member key is down: its lease ran out).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuffdb.cluster.etcd import EtcdClient, KeyValue


@dataclass
class ClusterKeys:
    """The keys under ``/tuffdb/<cluster>/``, read in one range: the leader key as stored
    (its value may not parse: readers decide), the sync set, and the decoded members and
    node registry (keys whose values do not parse are left out)."""

    leader: KeyValue | None
    sync: dict[str, Any] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)


def cluster_keys(kvs: Iterable[KeyValue], prefix: str) -> ClusterKeys:
    """Sort one range over ``prefix`` into :class:`ClusterKeys` (this command's read and
    each node's tick share it)."""
    leader_key = (prefix + "leader").encode()
    out = ClusterKeys(None)
    for kv in kvs:
        if kv.key == leader_key:
            out.leader = kv
            continue
        name = kv.key.decode()[len(prefix):]
        try:
            value = json.loads(kv.value)
        except ValueError:
            continue
        if name == "sync":
            out.sync = value
        elif name.startswith("members/"):
            out.members[name[8:]] = value
        elif name.startswith("nodes/"):
            out.nodes[name[6:]] = value
    return out


def read(etcd: EtcdClient, cluster: str) -> dict[str, Any]:
    prefix = f"/tuffdb/{cluster}/"
    keys = cluster_keys(etcd.get(prefix, prefix=True).kvs, prefix)
    leader: dict[str, Any] | None = None
    epoch = 0
    if keys.leader is not None:
        with contextlib.suppress(ValueError):  # not parsed: shown as no leader, as before
            leader, epoch = json.loads(keys.leader.value), keys.leader.create_revision
    sync, members, nodes = keys.sync, keys.members, keys.nodes
    leader_node = leader.get("node") if leader else None
    leader_lsn = int(members.get(leader_node, {}).get("lsn", 0)) if leader_node else 0
    rows = []
    now = time.time()
    for node in sorted(set(nodes) | set(members)):
        m = members.get(node)
        if m is None:
            rows.append({"node": node, "role": "down", "health": "down",
                         "address": nodes.get(node, {}).get("advertise")})
            continue
        lsn = int(m.get("lsn", 0))
        rows.append({
            "node": node, "role": m.get("role"), "epoch": m.get("epoch"), "lsn": lsn,
            "lag_rounds": max(0, leader_lsn - lsn) if node != leader_node else 0,
            "lag_s": m.get("lag_s", 0.0), "link": m.get("link"),
            "in_sync": node in sync.get("members", []) or node == sync.get("leader"),
            "address": m.get("advertise"), "ports": m.get("ports"),
            "health": "ok" if now - float(m.get("time", 0)) < 10 else "stale"})
    return {"cluster": cluster, "leader": leader_node, "epoch": epoch,
            "sync": sync.get("members", []), "nodes": rows}


def render(doc: dict[str, Any]) -> str:
    lines = [f"cluster {doc['cluster']}: leader {doc['leader'] or '(none)'}, epoch "
             f"{doc['epoch']}, sync set {', '.join(doc['sync']) or '(empty)'}",
             f"{'NODE':<12} {'ROLE':<10} {'EPOCH':>7} {'LSN':>10} {'LAG':>8} {'LAG S':>7} "
             f"{'LINK':<5} {'SYNC':<5} {'HEALTH':<7} ADDRESS"]
    for r in doc["nodes"]:
        lines.append(
            f"{r['node']:<12} {r.get('role') or '-':<10} {r.get('epoch') or '-':>7} "
            f"{r.get('lsn', '-'):>10} {r.get('lag_rounds', '-'):>8} "
            f"{r.get('lag_s', '-'):>7} {r.get('link') or '-':<5} "
            f"{'yes' if r.get('in_sync') else 'no':<5} {r['health']:<7} {r.get('address') or '-'}")
    return "\n".join(lines)
