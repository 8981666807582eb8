"""Commit listeners: how search indexes and watchers follow the collection write path.

``Database.apply`` (the one place every write goes through: plain writes, batches,
transactions at commit, trash restores) builds a :class:`PendingCommit` before it
writes anything, when any listener is registered in ``db.listeners``. That calls each
listener's ``validate(collection, records)`` (a listener may refuse the batch by raising,
e.g. a vector of the wrong dimension: nothing has been written yet) and notes which ids
existed. After the batch is written, still under the database lock (so in commit
order), ``publish()`` calls ``on_commit(collection, inserts, updates, deletes)`` once per
collection touched: inserts and updates are full records (with ``id``), deletes are ids.

Telling an insert from an update costs a read of every written key, so it is paid only
while some listener sets ``needs_kinds`` (a watcher); otherwise every written record is
passed in ``updates`` and ``inserts`` is empty. The database always carries one
:class:`SearchHook`, which costs a dict lookup per batch until search is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tuffdb.documents.collection import Write
    from tuffdb.documents.database import Database


class CommitListener(Protocol):
    needs_kinds: bool

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        """Raise to refuse a batch before anything is written."""

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        """Called after the batch is written, under the database lock, in commit order."""


class PendingCommit:
    """One batch on its way through ``Database.apply``."""

    __slots__ = ("db", "existed", "writes")

    def __init__(self, db: Database, writes: list[Write]) -> None:
        from tuffdb.documents.database import record_key  # noqa: PLC0415 - cycle

        self.db, self.writes = db, writes
        by_coll: dict[str, list[dict[str, Any]]] = {}
        for w in writes:
            if w.fields is not None:
                by_coll.setdefault(w.collection, []).append({**w.fields, "id": w.id})
        for listener in list(db.listeners):
            for name, records in by_coll.items():
                listener.validate(name, records)
        if any(listener.needs_kinds for listener in db.listeners):
            keys = [record_key(w.collection, w.id) for w in writes]
            self.existed = [v is not None for v in db.kv.get_many(keys)]
        else:
            self.existed = [True] * len(writes)  # puts reported as updates

    def publish(self) -> None:
        groups: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]] = {}
        for w, existed in zip(self.writes, self.existed, strict=True):
            ins, upd, dels = groups.setdefault(w.collection, ([], [], []))
            if w.fields is None:
                if existed:
                    dels.append(w.id)
            elif existed:
                upd.append({"id": w.id, **w.fields})
            else:
                ins.append({"id": w.id, **w.fields})
        for listener in list(self.db.listeners):
            for name, (ins, upd, dels) in groups.items():
                listener.on_commit(name, ins, upd, dels)


class SearchHook:
    """The database's search listener, light until search is used.

    It checks writes only for collections whose schema declares a vector index (the
    dimension rule), and forwards commits once some collection's search state exists
    (``search_index.state_for`` sets ``delegate``).
    """

    needs_kinds = False

    def __init__(self, db: Database) -> None:
        self.db = db
        self.delegate: CommitListener | None = None

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        if self.delegate is None:
            coll = self.db._collections.get(collection)  # noqa: SLF001 - collections in use
            schema = None if coll is None else coll.schema
            if schema is None or not any(f.index and f.index.get("type") == "vector"
                                         for f in schema.fields.values()):
                return
            from tuffdb.documents.search_index import attach  # noqa: PLC0415 - numpy on demand

            attach(self)
        assert self.delegate is not None
        self.delegate.validate(collection, records)

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        if self.delegate is not None:
            self.delegate.on_commit(collection, inserts, updates, deletes)
