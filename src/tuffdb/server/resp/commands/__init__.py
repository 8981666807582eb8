"""Command handlers, one module per Redis command group; importing registers them."""

from tuffdb.server.resp.commands import (
    acl,
    admin,
    bitmaps,
    cluster,
    connection,
    dump,
    geo,
    hashes,
    hyperloglog,
    introspection,
    keys,
    lcs,
    lists,
    pubsub,
    scripting,
    sets,
    sort,
    stream_groups,
    streams,
    strings,
    txn,
    zsets,
)

__all__ = ["acl", "admin", "bitmaps", "cluster", "connection", "dump", "geo", "hashes", "hyperloglog", "introspection", "keys", "lcs", "lists", "pubsub", "scripting",
           "sets", "sort", "stream_groups", "streams", "strings", "txn", "zsets"]
