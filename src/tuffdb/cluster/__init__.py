"""Replication and coordination (issue 29): a tuffdb cluster coordinated through etcd.

* :mod:`tuffdb.cluster.etcd` -- ``EtcdClient``, a thin synchronous client of etcd 3.4's
  JSON gRPC gateway (KV, transactions, leases, watches) with endpoint failover.
"""
