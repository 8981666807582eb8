"""Commit listeners: how search indexes and watchers follow the collection write path.

``Database.apply`` (the one place every write goes through: plain writes, batches,
transactions at commit, trash restores) builds a :class:`PendingCommit` before it
writes anything, when any listener is registered in ``db.listeners``. That calls each
listener's ``validate(collection, records)`` (a listener may refuse the batch by raising,
e.g. a vector of the wrong dimension: nothing has been written yet) and notes which ids
existed. After the batch is written, still under the database lock (so in commit
order), ``publish()`` calls ``on_commit(collection, inserts, updates, deletes)`` once per
collection touched: inserts and updates are full records (with ``id``), deletes are ids.

Listeners say per collection whether they care (``interested``); a batch no listener
cares about costs one dict per batch. Telling an insert from an update costs a read of
every written key, so it is paid only while an interested listener sets ``needs_kinds``
(a watcher); otherwise every written record is passed in ``updates`` and ``inserts`` is
empty. The database always carries one :class:`SearchHook`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tuffdb.documents.collection import Write
    from tuffdb.documents.database import Database


class CommitListener(Protocol):
    needs_kinds: bool

    def interested(self, collection: str) -> bool:
        """False: skip this listener for the collection (lets the write path stay lean)."""

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        """Raise to refuse a batch before anything is written."""

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        """Called after the batch is written, under the database lock, in commit order."""


class PendingCommit:
    """One batch on its way through ``Database.apply``."""

    __slots__ = ("db", "existed", "groups", "records", "writes")

    def __init__(self, db: Database, writes: list[Write], *, validate: bool = True) -> None:
        self.db, self.writes = db, writes
        # fast path: the usual batch touches one collection nobody listens to
        self.groups: dict[str, list[Any]] = {}
        self.records: dict[str, list[dict[str, Any]]] = {}  # validated; published as updates
        for w in writes:
            self.groups.setdefault(w.collection, [])
        for name in list(self.groups):
            listeners = [li for li in db.listeners if li.interested(name)]
            if not listeners:
                del self.groups[name]
                continue
            self.groups[name] = listeners
            if validate:
                records = self.records[name] = [{"id": w.id, **w.fields} for w in writes
                                                if w.collection == name and w.fields is not None]
                for listener in listeners:
                    listener.validate(name, records)
        self.existed: list[bool] | None = None
        if self.groups and any(li.needs_kinds for ls in self.groups.values() for li in ls):
            from tuffdb.documents.database import record_key  # noqa: PLC0415 - cycle

            keys = [record_key(w.collection, w.id) for w in writes]
            self.existed = [v is not None for v in db.kv.get_many(keys)]

    def publish(self) -> None:
        if not self.groups:
            return
        existed = self.existed or [True] * len(self.writes)  # puts reported as updates
        kinds: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]] = {
            name: ([], [], []) for name in self.groups}
        for w, was in zip(self.writes, existed, strict=True):
            group = kinds.get(w.collection)
            if group is None:
                continue
            if self.existed is None and w.collection in self.records:
                if w.fields is None:  # puts are the records validate saw, already built
                    group[2].append(w.id)
                continue
            ins, upd, dels = group
            if w.fields is None:
                if was:
                    dels.append(w.id)
            elif was:
                upd.append({"id": w.id, **w.fields})
            else:
                ins.append({"id": w.id, **w.fields})
        for name, listeners in self.groups.items():
            ins, upd, dels = kinds[name]
            if self.existed is None and name in self.records:
                upd = self.records[name]
            for listener in listeners:
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

    def interested(self, collection: str) -> bool:
        if self.delegate is not None and self.delegate.interested(collection):
            return True
        coll = self.db._collections.get(collection)  # noqa: SLF001 - collections in use
        schema = None if coll is None else coll.schema
        return schema is not None and any(f.index and f.index.get("type") == "vector"
                                          for f in schema.fields.values())

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        if self.delegate is None:
            from tuffdb.documents.search_index import attach  # noqa: PLC0415 - numpy on demand

            attach(self)
        assert self.delegate is not None
        self.delegate.validate(collection, records)

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        if self.delegate is not None:
            self.delegate.on_commit(collection, inserts, updates, deletes)

    def close(self) -> None:
        """The database closes: the search indexes stop their background work."""
        close = getattr(self.delegate, "close", None)
        if close is not None:
            close()
