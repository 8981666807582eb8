"""Replication and automatic failover through etcd (design: docs/design/replication.md).

``etcd`` (``EtcdClient``: a thin client of etcd 3.4's JSON gateway with endpoint
failover), ``state`` (a node's LSN, epoch and epoch history on disk), ``wire`` (the
replication stream's messages), ``sequencer`` (the leader's order over every store's
rounds and the wait for followers), ``appliers`` (how a follower applies a round to each
store), ``leader`` / ``follower`` (the two ends of the stream), ``node`` (roles, election,
membership: what the server host and the faces talk to).
"""
