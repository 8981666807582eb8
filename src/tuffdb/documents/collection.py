"""A collection: typed records, schema, secondary indexes, TTL, queries.

Records are dicts of typed values (see :mod:`tuffdb.documents.values`) with the
reserved fields ``id`` (a string, the key) and ``ttl`` (the expiry, a UTC datetime,
present only when the record has a TTL). Every write validates first and writes
nothing when anything is wrong.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from tuffdb.documents import codec, planner, values
from tuffdb.documents import schema as schema_mod
from tuffdb.documents.actions import apply_action
from tuffdb.documents.collection_meta import CollectionMeta, check_unique, schema_from_meta
from tuffdb.documents.query import MISSING, compile_node, get_path, parse
from tuffdb.documents.shape import page, parse_sort, project, sort_records
from tuffdb.documents.ttl import parse_ttl
from tuffdb.errors import IntegrityError, NotFoundError, NotLeaderError, ProgrammingError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.documents.database import Database
    from tuffdb.documents.indexes import Index

MAX_NAME_BYTES = 255


#: Keys of an update that touch a record's id or TTL settings (the general update path).
_TTL_KEYS = frozenset(("id", "ttl", "ttl_update_on_access"))


class Write:
    """One record's write in a batch; ``fields`` None is a delete. A plain class: compiled
    (mypyc), a dataclass would still run its generated, interpreted ``__init__``."""

    __slots__ = ("collection", "fields", "id", "stored", "touch", "ttl")

    def __init__(self, collection: str, id: str, fields: dict[str, Any] | None,  # noqa: A002
                 ttl: float | None = None, touch: bool = False) -> None:  # noqa: FBT001, FBT002
        self.collection = collection
        self.id = id
        self.fields = fields
        self.ttl = ttl
        self.touch = touch
        self.stored: bytes | None = None  # the bytes written, set by Database.apply

    def __repr__(self) -> str:
        what = "delete" if self.fields is None else "put"
        return f"Write({self.collection!r}, {self.id!r}, {what})"


def check_name(name: str, what: str = "collection name") -> None:
    if not isinstance(name, str) or not name or "\x00" in name or len(name.encode()) > MAX_NAME_BYTES:  # noqa: E501
        raise ProgrammingError(f"{what} must be 1-{MAX_NAME_BYTES} bytes of text without NUL")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Collection(CollectionMeta):
    """Use :meth:`Database.collection` to get one."""

    def __init__(self, db: Database, name: str) -> None:
        from tuffdb.documents.database import META, record_prefix  # noqa: PLC0415 - cycle

        self.db, self.name = db, name
        self._meta_key = META + name.encode()
        self._prefix = record_prefix(name)
        self.schema: schema_mod.Schema | None = None
        self.index_defs: dict[str, tuple[str, bool]] = {}  # field -> (kind, unique)
        self.indexes: dict[str, Index] = {}
        raw = db.kv.get(self._meta_key)
        self.has_meta = raw is not None
        if raw is not None:
            meta = codec.unpack(raw)
            if meta.get("schema") is not None:
                self.schema = schema_from_meta(meta["schema"])
            self.index_defs = {f: (k, u) for f, k, u in meta.get("indexes", [])}
        self._rebuild_indexes()

    # --- reading ----------------------------------------------------------------------
    def _decode(self, rid: str, data: bytes) -> dict[str, Any] | None:
        return self.decode_stored(rid, data)[0]

    def decode_stored(self, rid: str, data: bytes) -> tuple[dict[str, Any] | None, bool]:
        """The record :meth:`stored` returned as ``data`` (None if it expired), and whether
        it is a function of those bytes alone (no TTL: the clock plays no part)."""
        fields, ttl, touch = codec.unpack_record(data)
        if ttl is None:
            return {"id": rid, **fields}, True
        expiry = fields.get("ttl")
        if isinstance(expiry, dt.datetime) and expiry <= _now():
            return None, False  # expired; the store drops it on its own schedule
        if touch:
            fields["ttl"] = _now() + dt.timedelta(seconds=ttl)
            try:
                self.db.kv.put(self._key(rid), codec.pack_record(fields, ttl, touch), ttl=ttl,
                               sync=self.db.sync)
            except NotLeaderError:
                # A cluster follower serves the read; only the leader's reads extend
                # the TTL (a follower's store changes only by the leader's log).
                fields["ttl"] = expiry
        return {"id": rid, **fields}, False

    def _key(self, rid: str) -> bytes:
        return self._prefix + rid.encode()

    def load(self, rid: str) -> dict[str, Any] | None:
        """The record ``rid`` or None (no projection, no error)."""
        data = self.stored(rid)
        return None if data is None else self._decode(rid, data)

    def stored(self, rid: str) -> bytes | None:
        """Record ``rid``'s bytes as stored, undecoded (see :meth:`decode_stored`), or None."""
        if not isinstance(rid, str) or "\x00" in rid:
            return None
        data: bytes | None = self.db.kv.get(self._key(rid))
        return data

    def stored_many(self, rids: list[str]) -> list[bytes | None]:
        """``[stored(r) for r in rids]`` in one engine call (``KVStore.get_many``)."""
        ok = [isinstance(r, str) and "\x00" not in r for r in rids]
        if not all(ok):
            return [self.stored(r) if good else None for r, good in zip(rids, ok, strict=True)]
        prefix = self._prefix
        result: list[bytes | None] = self.db.kv.get_many([prefix + r.encode() for r in rids])
        return result

    def _scan(self) -> Iterator[dict[str, Any]]:
        n = len(self._prefix)
        for key, data in self.db.kv.scan(self._prefix):
            record = self._decode(key[n:].decode(), data)
            if record is not None:
                yield record

    def get(self, rid: str, *, select: list[str] | None = None,
            exclude: list[str] | None = None) -> dict[str, Any]:
        """The record with id ``rid``.

        :raises NotFoundError: when there is none (or it expired).
        """
        record = self.load(rid)
        if record is None:
            raise NotFoundError(f"no record '{rid}' in '{self.name}'")
        return project(record, select, exclude)

    def matches(self, filter: Any = None, sort: Any = None, need: int | None = None) -> tuple[list[dict[str, Any]], planner.Plan]:  # noqa: A002, E501
        """Records matching ``filter`` and the plan used.

        With ``need``, stop after that many matches when the order allows it (no sort, or
        the plan walks an index in sort order).
        """
        node = parse(filter)
        pred = compile_node(node)
        sort_spec = parse_sort(sort)
        with self.db.lock:
            plan = planner.plan(node, self.indexes, sort_spec)
            walk = None if plan.walk is None else list(plan.walk)
        if sort_spec and not plan.sort_done:
            need = None
        if plan.ids is not None:
            source: Any = self._fetch(plan.ids)
        elif walk is not None:
            source = self._fetch_lazily(walk) if need is not None else self._fetch(walk)
        else:
            source = self._scan()
        out = []
        for record in source:
            if pred(record):
                out.append(record)
                if need is not None and len(out) >= need:
                    break
        return out, plan

    def _fetch(self, ids: list[str]) -> Iterator[dict[str, Any]]:
        for rid, data in zip(ids, self.db.kv.get_many([self._key(i) for i in ids]), strict=True):
            if data is not None and (record := self._decode(rid, data)) is not None:
                yield record

    def _fetch_lazily(self, walk: list[str]) -> Iterator[dict[str, Any]]:
        for rid in walk:
            record = self.load(rid)
            if record is not None:
                yield record

    def find(self, filter: Any = None, *, sort: Any = None, skip: int | None = None,  # noqa: A002, PLR0913 - type or option dispatch, one case each
             limit: int | None = None, select: list[str] | None = None,
             exclude: list[str] | None = None, join: Any = None) -> list[dict[str, Any]]:
        """Records matching ``filter`` (None = all), sorted, paged, joined and projected."""
        sort_spec = parse_sort(sort)
        need = None if limit is None else (skip or 0) + limit
        records, plan = self.matches(filter, sort_spec, need=need)
        if not plan.sort_done:
            sort_records(records, sort_spec)
        records = page(records, skip, limit)
        if join:
            from tuffdb.documents.joins import apply_join  # noqa: PLC0415

            records = apply_join(self.db, records, join)
            if select:
                select = [*select, *_join_fields(join)]
        return [project(r, select, exclude) for r in records]

    def explain(self, filter: Any = None, *, sort: Any = None) -> dict[str, Any]:  # noqa: A002
        """Which plan ``find(filter, sort=sort)`` would use: ``{"plan", "indexes", ...}``."""
        with self.db.lock:
            return planner.plan(parse(filter), self.indexes, parse_sort(sort)).explain()

    def count(self, filter: Any = None) -> int:  # noqa: A002
        return len(self.matches(filter)[0])

    def distinct(self, field: str, filter: Any = None) -> list[Any]:  # noqa: A002
        """Distinct values of ``field`` among matching records, in value order."""
        seen: dict[Any, Any] = {}
        for record in self.matches(filter)[0]:
            v = get_path(record, field)
            if v is not None and v is not MISSING:
                seen.setdefault(values.order_key(v), v)
        return [seen[k] for k in sorted(seen)]

    def __len__(self) -> int:
        return sum(1 for _ in self._scan())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._scan()

    # --- writing ----------------------------------------------------------------------
    def prepare(self, record: dict[str, Any], *, rid: str | None = None, ttl: Any = None,
                touch: bool | None = None, insert: bool = True) -> Write:
        """Validate a full record and build its :class:`Write` (nothing is written)."""
        if not isinstance(record, dict):
            raise ProgrammingError("a record must be a dict")
        fields = dict(record)
        given_id = fields.pop("id", None)
        rid = rid if rid is not None else given_id
        if rid is None:
            rid = self.db.id_factory() if self.db.id_factory else str(uuid.uuid4())
        check_name(rid, "record id")
        record_ttl = fields.pop("ttl", None)
        ttl = record_ttl if ttl is None else ttl
        touch_given = fields.pop("ttl_update_on_access", None)
        touch = bool(touch if touch is not None else touch_given)
        if isinstance(ttl, dt.datetime):
            ttl = max((ttl - _now()).total_seconds(), 0.001)
        seconds = parse_ttl(ttl) if ttl is not None else (self.db.default_ttl if insert else None)
        values.check(fields)
        if self.schema is not None:
            fields = self.schema.apply(fields, insert=insert)
        if seconds:
            fields["ttl"] = _now() + dt.timedelta(seconds=seconds)
        return Write(self.name, rid, fields, seconds or None, touch and bool(seconds))

    def commit(self, writes: list[Write]) -> None:
        """Check unique constraints across the batch and write it atomically to memory."""
        db = self.db
        with db.lock:
            if (len(writes) == 1 and writes[0].collection == self.name and not self.indexes
                    and self.has_meta and db._collections.get(self.name) is self):  # noqa: SLF001
                db.apply(writes)  # one write, no unique index to check, metadata stored
                return
            check_unique(db, writes)
            db.ensure_meta(w.collection for w in writes if w.fields is not None)
            db.apply(writes)

    def insert(self, record: dict[str, Any], *, ttl: Any = None,
               ttl_update_on_access: bool | None = None) -> str:
        """Insert one record; returns its id (``record["id"]`` is honoured if given).

        :raises IntegrityError: on a schema violation, a duplicate unique value or id.
        """
        return self.insert_many([record], ttl=ttl, ttl_update_on_access=ttl_update_on_access)[0]

    def insert_many(self, records: list[dict[str, Any]], *, ttl: Any = None,
                    ttl_update_on_access: bool | None = None) -> list[str]:
        """Insert records all-or-nothing; returns their ids in order."""
        writes = [self.prepare(r, ttl=ttl, touch=ttl_update_on_access) for r in records]
        with self.db.lock:
            ids = [w.id for w in writes]
            if len(set(ids)) != len(ids):
                raise IntegrityError("duplicate ids in one batch", condition="id")
            for w in writes:
                if self.load(w.id) is not None:
                    raise IntegrityError(f"a record with id '{w.id}' exists", condition="id")
            self.commit(writes)
        return ids

    def update_write(self, old: dict[str, Any], changes: dict[str, Any]) -> Write:
        """The write that merges ``changes`` into ``old`` (top-level fields replaced)."""
        if not isinstance(changes, dict):
            raise ProgrammingError("updates must be a dict of fields")
        merged = {k: v for k, v in old.items() if k != "id"}
        ttl = changes.get("ttl", merged.pop("ttl", None))
        merged.update({k: v for k, v in changes.items() if k not in ("id", "ttl")})
        return self.prepare(merged, rid=old["id"], ttl=ttl, insert=False)

    def update(self, rid: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge ``changes`` into record ``rid``; returns the full new record.

        :raises NotFoundError: when there is no such record.
        """
        with self.db.lock:
            if self.merges_plainly(changes):
                # The usual update (no schema, no TTL on either side): merge into the
                # stored fields as decoded; the same record and checks as the general
                # path below, without building the record, copying it and re-reading
                # its TTL settings twice.
                data = self.stored(rid)
                if data is not None:
                    fields, ttl, _ = codec.unpack_record(data)
                    if ttl is None and "ttl" not in fields:
                        values.check(changes)
                        fields.update(changes)
                        self.commit([Write(self.name, rid, fields)])
                        return {"id": rid, **fields}
            w = self.update_write(self.get(rid), changes)
            self.commit([w])
        return {"id": rid, **(w.fields or {})}

    def merges_plainly(self, changes: dict[str, Any]) -> bool:
        """Whether an update by ``changes`` is a plain merge: no schema to apply, no id or
        TTL setting among the changes."""
        return self.schema is None and type(changes) is dict and _TTL_KEYS.isdisjoint(changes)

    def update_known(self, rid: str, changes: dict[str, Any], fields: dict[str, Any],
                     *, plain: bool = False) -> tuple[dict[str, Any], bytes | None]:
        """:meth:`update` for a caller holding ``db.lock`` that has just decoded the bytes
        :meth:`stored` returns for record ``rid`` into ``fields`` (no TTL; its own dict,
        which this merges ``changes`` into) and ``changes`` that :meth:`merges_plainly`:
        the merge of :meth:`update`'s usual path without reading the record again.
        ``plain``: the caller found every change a plain scalar (codec.plain_scalars),
        storable as is.

        Returns the new record and the bytes now stored for it (what :meth:`stored`
        returns until the next write), so the caller need not look them up again."""
        if not plain:
            values.check(changes)
        fields.update(changes)
        w = Write(self.name, rid, fields)
        self.commit([w])
        return {"id": rid, **fields}, w.stored

    def update_many(self, filter: Any, changes: dict[str, Any]) -> int:  # noqa: A002
        with self.db.lock:
            writes = [self.update_write(r, changes) for r in self.matches(filter)[0]]
            self.commit(writes)
        return len(writes)

    def actions(self, rid: str, steps: list[Any]) -> dict[str, Any]:
        """Apply ``[(action, field, value), ...]`` atomically; returns the new record."""
        with self.db.lock:
            record = self.get(rid)
            for step in steps:
                action, field, *rest = step
                apply_action(record, action, field, rest[0] if rest else None)
            return self.update(rid, record)

    def action(self, rid: str, action: str, field: str, value: Any = None) -> dict[str, Any]:
        return self.actions(rid, [(action, field, value)])

    def delete(self, rid: str) -> dict[str, Any]:
        """Delete record ``rid``; returns it. :raises NotFoundError: when absent."""
        with self.db.lock:
            record = self.get(rid)
            self.commit([Write(self.name, rid, None)])
        return record

    def delete_many(self, filter: Any = None) -> int:  # noqa: A002
        with self.db.lock:
            ids = [r["id"] for r in self.matches(filter)[0]]
            self.commit([Write(self.name, i, None) for i in ids])
        return len(ids)

    def upsert(self, rid: str, record: dict[str, Any]) -> dict[str, Any]:
        """Update ``rid`` with ``record`` (merge) if it exists, else insert it with that id."""
        with self.db.lock:
            if self.load(rid) is not None:
                return self.update(rid, record)
            self.insert({**record, "id": rid})
            return self.get(rid)

    def search(self, query: str = "", **options: Any) -> dict[str, Any]:
        """Full-text / vector / hybrid search: see :mod:`tuffdb.documents.search`."""
        from tuffdb.documents.search import search  # noqa: PLC0415 - numpy on demand

        return search(self, query, **options)

    def search_stats(self, *, settle: float | None = None) -> dict[str, Any]:
        """The search indexes of this collection: sizes, graphs, recall calibration.

        ``settle``: first wait up to that many seconds for the graphs to take in every
        vector and finish their calibration.
        """
        from tuffdb.documents.search import stats  # noqa: PLC0415 - numpy on demand

        return stats(self, settle=settle)

    def watch(self, filter: Any = None, **options: Any) -> Any:  # noqa: A002
        """Mutation events of this collection: see :mod:`tuffdb.documents.watch`."""
        from tuffdb.documents.watch import watch  # noqa: PLC0415

        return watch(self, filter, **options)


def _join_fields(join: Any) -> list[str]:
    specs = join if isinstance(join, list) else [join]
    return [str(s.get("as_field")) for s in specs if isinstance(s, dict)]
