"""Collection metadata and maintenance: schema, secondary indexes, unique checks, trash.

A mixin of :class:`tuffdb.documents.collection.Collection`, split out to keep modules
small; see that class for the record model. Index contents are rebuilt from the records
(one prefix scan) whenever the definitions change or the collection is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.documents import codec, values
from tuffdb.documents import schema as schema_mod
from tuffdb.documents.indexes import Index, key_of, make_index
from tuffdb.errors import IntegrityError, NotFoundError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.documents.collection import Write
    from tuffdb.documents.database import Database

_NULL_KEY = values.order_key(None)


class CollectionMeta:
    """Schema, index and trash handling shared by every collection."""

    db: Database
    name: str
    has_meta: bool
    schema: schema_mod.Schema | None
    index_defs: dict[str, tuple[str, bool]]
    indexes: dict[str, Index]
    _meta_key: bytes
    _prefix: bytes

    def _scan(self) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def load(self, rid: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def commit(self, writes: list[Write]) -> None:
        raise NotImplementedError

    def _save_meta(self) -> None:
        meta = {"schema": None if self.schema is None else self.schema.to_wire(),
                "indexes": [[f, k, u] for f, (k, u) in sorted(self.index_defs.items())]}
        self.db.kv.put(self._meta_key, codec.pack(meta), sync=self.db.sync)
        self.has_meta = True

    def ensure_meta(self) -> None:
        if not self.has_meta:
            self._save_meta()

    def set_schema(self, schema: Any) -> None:
        """Replace the schema (a :class:`Schema`, its wire dict, or None) and its indexes."""
        if schema is not None and not isinstance(schema, schema_mod.Schema):
            schema = schema_mod.from_wire(schema)
        with self.db.lock:
            if schema is not None and self.schema is not None:
                schema.version, schema.created_at = self.schema.version + 1, self.schema.created_at
            self.schema = schema
            for f, kind in (schema.indexed_fields() if schema else {}).items():
                self.index_defs[f] = (kind, schema.fields[f].unique)
            self._save_meta()
            self._rebuild_indexes()
            for listener in list(self.db.listeners):  # SchemaChanged pushes: documents/watch.py
                if hasattr(listener, "on_schema"):
                    listener.on_schema(self.name, schema)

    def create_index(self, field: str, kind: str = "hash", *, unique: bool = False) -> None:
        """Build a secondary index on ``field`` (``"hash"`` or ``"ordered"``).

        :raises IntegrityError: when ``unique`` and existing records share a value.
        """
        make_index(field, kind)  # validates kind
        with self.db.lock:
            old = self.index_defs.get(field)
            self.index_defs[field] = ("ordered" if kind == "btree" else kind, unique)
            try:
                self._rebuild_indexes()
            except IntegrityError:
                if old is None:
                    del self.index_defs[field]
                else:
                    self.index_defs[field] = old
                self._rebuild_indexes()
                raise
            self._save_meta()

    def drop_index(self, field: str) -> bool:
        with self.db.lock:
            if self.index_defs.pop(field, None) is None:
                return False
            self.indexes.pop(field, None)
            self._save_meta()
            return True

    def _rebuild_indexes(self) -> None:
        self.indexes = {f: make_index(f, k, unique=u) for f, (k, u) in self.index_defs.items()}
        if not self.indexes:
            return
        for record in self._scan():
            for idx in self.indexes.values():
                if idx.unique and (k := key_of(record, idx.field)) != _NULL_KEY and idx.lookup([k]):
                    raise IntegrityError(f"duplicate value in unique field '{idx.field}'", idx.field)  # noqa: E501
                idx.add(record["id"], record)

    def index_write(self, w: Any) -> None:
        for idx in self.indexes.values():
            if w.fields is None:
                idx.remove(w.id)
            else:
                idx.add(w.id, {**w.fields, "id": w.id})

    # --- trash -------------------------------------------------------------------------
    def restore(self, rid: str) -> dict[str, Any]:
        """Bring back a deleted record from the trash (as it was; no schema re-check).

        :raises NotFoundError: when it is not in the trash (never deleted, or expired).
        :raises IntegrityError: when a record with that id exists again.
        """
        from tuffdb.documents.database import TRASH  # noqa: PLC0415 - cycle

        key = TRASH + self._prefix[2:] + rid.encode()
        with self.db.lock:
            data = self.db.kv.get(key)
            if data is None:
                raise NotFoundError(f"no deleted record '{rid}' in '{self.name}'")
            if self.load(rid) is not None:
                raise IntegrityError(f"a record with id '{rid}' exists", condition="id")
            fields, ttl, touch = codec.unpack_record(data)
            from tuffdb.documents.collection import Write  # noqa: PLC0415 - cycle

            self.commit([Write(self.name, rid, fields, ttl, touch)])
            self.db.kv.delete(key, sync=self.db.sync)
        return {"id": rid, **fields}

    def restore_all(self) -> int:
        """Restore every deleted record of this collection still in the trash."""
        from tuffdb.documents.database import TRASH  # noqa: PLC0415 - cycle

        prefix = TRASH + self._prefix[2:]
        ids = [k[len(prefix) :].decode() for k, _ in self.db.kv.scan(prefix)]
        restored = 0
        for rid in ids:
            try:
                self.restore(rid)
            except (NotFoundError, IntegrityError):
                continue
            restored += 1
        return restored

    def check(self) -> list[str]:
        problems = [f"{self.name}.{f}: {p}" for f, idx in self.indexes.items() for p in idx.check()]
        for record in self._scan():
            for f, idx in self.indexes.items():
                if record["id"] not in idx.lookup([key_of(record, f)]):
                    problems.append(f"{self.name}.{f}: record {record['id']} not indexed")
        return problems


def check_unique(db: Database, writes: list[Write]) -> None:
    touched = {(w.collection, w.id) for w in writes}
    claimed: dict[tuple[str, str, Any], str] = {}
    for w in writes:
        if w.fields is None:
            continue
        coll = db.collection(w.collection)
        if not coll.indexes:
            continue
        record = {**w.fields, "id": w.id}
        for f, idx in coll.indexes.items():
            if not idx.unique or (k := key_of(record, f)) == _NULL_KEY:
                continue
            if claimed.setdefault((w.collection, f, k), w.id) != w.id:
                raise IntegrityError(f"duplicate value for unique field '{f}' in one batch", f)
            for holder in idx.lookup([k]):
                if (w.collection, holder) not in touched and coll.load(holder) is not None:
                    raise IntegrityError(f"value of unique field '{f}' is taken", condition=f)


def schema_from_meta(raw: dict[str, Any]) -> schema_mod.Schema:
    s = schema_mod.from_wire(raw)
    s.version = int(raw.get("version", 1))
    for name in ("created_at", "last_modified"):
        parsed = values.parse_datetime(raw.get(name) or "")
        if parsed is not None:
            setattr(s, name, parsed)
    return s
