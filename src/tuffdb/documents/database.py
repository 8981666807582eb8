"""The embedded document database: collections of typed records on one KVStore.

Key layout in the KVStore (normative: ``docs/format/documents.md``)::

    d\\x00<collection>\\x00<id>   a record (codec.pack_record)
    m\\x00<collection>            collection metadata: schema, index definitions
    t\\x00<collection>\\x00<id>   a deleted record, restorable for TRASH_TTL_SECONDS
    x\\x00<16 random bytes>        a write intent: every op of one multi-key batch
    k\\x00<key>                   an ekoDB KV entry (served by the REST face)
    s\\x00<name>                  server state: config, API keys, JWT secret

Records are scanned by prefix in key order, which is id order; that order is the
tie-breaker of every sort, so index plans and full scans agree exactly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Self

from tuffdb._failpoints import failpoint
from tuffdb._format.kv import OP_PUT
from tuffdb.documents import codec
from tuffdb.documents.collection import Collection, Write, check_name
from tuffdb.documents.listeners import PendingCommit, SearchHook
from tuffdb.documents.write_lock import WriteLock
from tuffdb.errors import ClosedError, IntegrityError, NotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

    from tuffdb.documents.transactions import Transaction

RECORD, META, KV, SYSTEM, TRASH = b"d\x00", b"m\x00", b"k\x00", b"s\x00", b"t\x00"
INTENT = b"x\x00"  # a multi-key write in flight: replayed on open
TRASH_TTL_SECONDS = 7 * 86400  # deleted records stay restorable this long
# A durable batch of at least this many ops starts its group commit at once (see apply);
# smaller ones wait for the lock's release, so concurrent writers share their fsync.
COMMIT_SOON_OPS = 64
# Records whose commit sequence is kept for open transactions to check against
# (``versions``). Past it the oldest open transactions are ended ("TooOld": their next
# operation or commit gets ConflictError, retryable) and what no open one needs is dropped,
# so a transaction left open (a crashed client, a long timeout) cannot grow memory without
# bound under a write load.
TRACKED_VERSIONS = 1_000_000
# Records are read one at a time by id (gets, search results, joins), so the store's cold
# blocks are 4 KiB, not the engine's 16 KiB: a cache miss decodes a quarter of the bytes and
# the block cache holds four times as many distinct records (docs/design/kv.md, "Block size").
BLOCK_BYTES = 4 << 10


def record_key(collection: str, rid: str) -> bytes:
    return RECORD + collection.encode() + b"\x00" + rid.encode()


def record_prefix(collection: str) -> bytes:
    return RECORD + collection.encode() + b"\x00"


class Database:
    """Collections of documents stored through one :class:`tuffdb.KVStore`.

    ``Database.open(path)`` opens (or creates) the store; ``Database(kv)`` wraps a store
    you opened yourself. ``sync`` is passed to every KV write: ``None`` follows the
    store's durability mode, ``False`` never waits (asyncio servers then use
    ``kv.write_ticket()`` / ``kv.when_durable()``).
    """

    def __init__(
        self,
        kv: Any,
        *,
        default_ttl: float | None = None,
        sync: bool | None = None,
        id_factory: Any = None,
    ) -> None:
        self.kv = kv
        self.default_ttl = default_ttl
        self.sync = sync
        self.id_factory = id_factory
        self.lock = WriteLock(self._settle)  # durable waits happen after its release
        self._collections: dict[str, Collection] = {}
        self._closed = False
        # Transaction bookkeeping (in memory): commit sequence numbers per record and per
        # collection, compared against a transaction's start to detect conflicts.
        self.seq = 0
        self.versions: dict[tuple[str, str], int] = {}
        self.collection_versions: dict[str, int] = {}
        self.active_transactions: dict[str, Transaction] = {}
        self.tracked_versions = TRACKED_VERSIONS  # (tests lower it)
        self.trash_ttl: float | None = TRASH_TTL_SECONDS  # None: deletes are final
        self.listeners: list[Any] = [SearchHook(self)]  # commit listeners: documents/listeners.py
        # A cluster follower's: called with every key a leader's round wrote (replica_apply).
        self.replica_listeners: list[Callable[[list[bytes]], None]] = []
        # Told (collection, id) of every record written, (collection, None) for a dropped
        # collection, once the write is in the store (a server holds readers of a written
        # record until the write is durable: server/loop_rounds.py).
        self.on_written: Callable[[list[tuple[str, str | None]]], None] | None = None
        self.replayed = self._replay_intents()

    @classmethod
    def open(cls, path: str | Path, *, default_ttl: float | None = None,
             sync: bool | None = None, **kv_options: Any) -> Database:
        """Open the database at ``path``; ``kv_options`` go to ``KVStore.open``
        (``durability``, ``interval_ms``, ``encryption_key``, ``cache_bytes``, ...);
        ``block_bytes`` defaults to :data:`BLOCK_BYTES`.
        """
        from tuffdb.kv.store import KVStore  # noqa: PLC0415 - the engine is optional at import

        kv_options.setdefault("block_bytes", BLOCK_BYTES)
        return cls(KVStore.open(path, **kv_options), default_ttl=default_ttl, sync=sync)

    # --- collections --------------------------------------------------------------
    def collection(self, name: str) -> Collection:
        """The collection ``name`` (created, with no schema, on its first write)."""
        self._check_open()
        coll = self._collections.get(name)
        if coll is None:
            with self.lock:
                coll = self._collections.get(name)
                if coll is None:
                    check_name(name)
                    coll = Collection(self, name)
                    self._collections[name] = coll
        return coll

    def __getitem__(self, name: str) -> Collection:
        return self.collection(name)

    def collections(self) -> list[str]:
        """Names of the collections that exist (have metadata), sorted."""
        self._check_open()
        return [k[len(META) :].decode() for k, _ in self.kv.scan(META)]

    def has_collection(self, name: str) -> bool:
        return self.kv.get(META + name.encode()) is not None

    def create_collection(self, name: str, schema: Any = None) -> Collection:
        """Create ``name`` with an optional schema (:class:`Schema` or its wire dict).

        :raises IntegrityError: when the collection already exists.
        """
        coll = self.collection(name)
        with self.lock:
            if self.has_collection(name):
                raise IntegrityError(f"collection '{name}' already exists", condition=name)
            coll.set_schema(schema)
        return coll

    def drop_collection(self, name: str) -> int:
        """Delete a collection, its records and its metadata; returns how many records.

        :raises NotFoundError: when it does not exist.
        """
        self._check_open()
        with self.lock:
            if not self.has_collection(name):
                raise NotFoundError(f"collection '{name}' does not exist")
            items = list(self.kv.scan(record_prefix(name)))
            self._to_trash(items)
            self.kv.delete_many([k for k, _ in items] + [META + name.encode()], sync=self.sync)
            self._collections.pop(name, None)
            self.seq += 1
            self.collection_versions[name] = self.seq
            if self.on_written is not None:
                self.on_written([(name, None)])
            return len(items)

    def _defers_wait(self) -> bool:
        """Whether ``apply`` writes without waiting and leaves the durable wait to the
        lock's release (see :mod:`tuffdb.documents.write_lock`): when the write must be
        durable and the store hands out write tickets."""
        if self.sync is False or not hasattr(self.kv, "write_ticket"):
            return False
        mode = getattr(self.kv, "durability", None)
        return mode == "always" if self.sync is None else mode in ("always", "interval")

    def _settle(self, ticket: int) -> None:
        """Block until the writes covered by ``ticket`` are durable (no lock held)."""
        self.kv.when_durable(ticket).result()

    def _replay_intents(self) -> int:
        intents = list(self.kv.scan(INTENT))
        for key, raw in intents:  # its ops and its own delete, in one atomic batch
            ops = [tuple(op) for op in codec.unpack(raw)]  # stored as lists; ops are tuples
            self.kv.write_batch([*ops, (key, None)], sync=self.sync)
        return len(intents)

    def _to_trash(self, items: list[tuple[bytes, bytes]]) -> None:
        if self.trash_ttl and items:
            trash = [(TRASH + k[len(RECORD) :], v) for k, v in items]
            self.kv.put_many(trash, ttl=self.trash_ttl, sync=self.sync)

    # --- transactions ---------------------------------------------------------------
    def transaction(
        self, isolation: str | None = "ReadCommitted", timeout: float = 300.0
    ) -> Transaction:
        """Begin a transaction (see :mod:`tuffdb.documents.transactions`)."""
        from tuffdb.documents.transactions import Transaction  # noqa: PLC0415 - cycle

        self._check_open()
        return Transaction(self, isolation=isolation, timeout=timeout)

    # --- the write path ---------------------------------------------------------------
    def apply(self, writes: list[Write]) -> None:
        """Write a batch (caller holds ``self.lock`` and has validated it), all or nothing.

        The ops go to the store in one ``write_batch``: one log frame, so after a crash
        either every op of the batch is there or none is (the engine's guarantee). Stores
        written by earlier versions may still hold write intents; they are replayed at
        open (:meth:`replay_intents`).

        Durable writes do not wait here, under the lock: the ops go to the store without
        waiting and the caller waits for their group commit once the lock is released
        (:mod:`tuffdb.documents.write_lock`), so concurrent writers share one fsync.
        """
        pending = None  # PendingCommit may refuse the batch; for one write nobody listens
        listeners = self.listeners  # to (the usual case), skip building it
        if listeners and (len(writes) != 1
                          or any(li.interested(writes[0].collection) for li in listeners)):
            pending = PendingCommit(self, writes)
        ops: list[tuple[bytes, bytes | None, float | None]] = []
        deletes = []
        for w in writes:
            key = record_key(w.collection, w.id)
            if w.fields is None:
                deletes.append(key)
                ops.append((key, None, None))
            else:
                w.stored = packed = codec.pack_record(w.fields, w.ttl, w.touch)
                ops.append((key, packed, w.ttl))
        if deletes and self.trash_ttl:
            old = self.kv.get_many(deletes)
            ops.extend((TRASH + k[len(RECORD) :], v, self.trash_ttl)
                       for k, v in zip(deletes, old, strict=True) if v is not None)
        defer = self._defers_wait()
        sync = False if defer else self.sync
        if len(ops) == 1 and ops[0][1] is not None:  # the usual single-record write
            key, value, ttl = ops[0]
            self.kv.put(key, value, ttl=ttl, sync=sync)
        else:
            self.kv.write_batch(ops, sync=sync)
            failpoint("documents_after_batch")
        if defer:
            self.lock.owe(self.kv.write_ticket())
            if len(ops) >= COMMIT_SOON_OPS:
                # A bulk write pays its own fsync anyway: start it now, so it runs while
                # the indexes and listeners below take the batch (20 ms for 1,000
                # documents with a text index), not after them.
                self.kv.commit_soon()
        self._applied(writes, pending)

    def _applied(self, writes: list[Write], pending: PendingCommit | None) -> None:
        """Bookkeeping after a batch is written: versions, indexes, listeners."""
        self.seq += 1
        seq = self.seq
        track = bool(self.active_transactions)  # else nobody can conflict with the past
        for w in writes:
            if track:
                self.versions[(w.collection, w.id)] = seq
            self.collection_versions[w.collection] = seq
            coll = self._collections.get(w.collection)
            if coll is None:
                coll = self.collection(w.collection)
            if coll.indexes:
                coll.index_write(w)
        if pending is not None:
            pending.publish()
        if self.on_written is not None:
            self.on_written([(w.collection, w.id) for w in writes])
        if track:
            now = time.monotonic()
            for tx in [t for t in self.active_transactions.values() if now > t.deadline + 1.0]:
                tx.rollback()  # abandoned past its timeout: stop pinning the version table
            if len(self.versions) > self.tracked_versions:
                self._end_oldest_transactions()
        if not self.active_transactions and self.versions:
            self.versions.clear()

    def _end_oldest_transactions(self) -> None:
        """The version table passed its bound (TRACKED_VERSIONS): end the open
        transactions older than its newest half ("TooOld": they get ConflictError, and may
        retry) and drop the versions no remaining one can conflict with."""
        seqs = sorted(self.versions.values())
        cut = seqs[len(seqs) // 2]
        for tx in [t for t in self.active_transactions.values() if t.start_seq < cut]:
            tx.state = "TooOld"
            self.active_transactions.pop(tx.id, None)
        if self.active_transactions:
            oldest = min(t.start_seq for t in self.active_transactions.values())
            self.versions = {k: v for k, v in self.versions.items() if v > oldest}

    # --- a cluster follower ---------------------------------------------------------
    def replica_apply(self, frames: bytes) -> int:
        """Apply a leader's committed KV frames (``KVStore.replica_apply``) and keep what
        is derived from them current, as the leader's own write path does: record
        versions, indexes, search and watchers see the records written, in order. A
        collection whose metadata changed (schema, index definitions, drop) is reloaded
        on its next use. A leader's multi-key commit arrives as the one frame it wrote
        (all or nothing); intents (written by earlier versions) are stored as they come,
        and a node promoted to leader replays what is left (:meth:`replay_intents`).
        Returns a ticket for ``kv.when_durable``.
        """
        kv = self.kv
        records = kv.replica_records(frames)
        writes: list[Write] = []
        changed: set[str] = set()
        for r in records:
            key = r.key
            prefix = key[:2]
            if prefix == RECORD:
                name, _, rid = key[2:].partition(b"\x00")
                fields = None
                if r.op == OP_PUT and not (r.expiry_ms and r.expiry_ms <= self._now_ms()):
                    fields = codec.unpack_record(r.value)[0]
                writes.append(Write(name.decode(), rid.decode(), fields))
            elif prefix == META:
                changed.add(key[2:].decode())
        with self.lock:
            pending = None
            if writes and self.listeners:
                pending = PendingCommit(self, writes, validate=False)
            ticket = kv.replica_apply_records(records)
            for name in changed:
                self._collections.pop(name, None)
            if writes:
                self._applied(writes, pending)
            elif changed:
                self.seq += 1
                for name in changed:
                    self.collection_versions[name] = self.seq
                if self.on_written is not None:
                    self.on_written([(name, None) for name in changed])
        if self.replica_listeners:
            keys = [r.key for r in records]
            for listener in self.replica_listeners:
                listener(keys)
        return int(ticket)

    def replay_intents(self) -> int:
        """Finish the multi-key writes whose intents are still stored (at open, and when a
        follower becomes the leader); returns how many."""
        with self.lock:
            return self._replay_intents()

    @staticmethod
    def _now_ms() -> int:
        return int(time.time() * 1000)

    def ensure_meta(self, names: Iterable[str]) -> None:
        for name in set(names):
            coll = self._collections.get(name)
            if coll is None:
                coll = self.collection(name)
            if not coll.has_meta:
                coll.ensure_meta()

    # --- lifecycle ------------------------------------------------------------------
    def check(self) -> list[str]:
        """Self-check of the in-memory indexes against the stored records."""
        problems = list(self.kv.check()) if hasattr(self.kv, "check") else []
        for coll in list(self._collections.values()):
            problems.extend(coll.check())
        return problems

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the database is closed; open it again")

    def close(self) -> None:
        """Flush and close the store (idempotent)."""
        if not self._closed:
            self._closed = True
            for listener in self.listeners:  # background work first (hnsw builders)
                close = getattr(listener, "close", None)
                if close is not None:
                    close()
            self.kv.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
