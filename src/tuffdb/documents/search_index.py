"""Per-collection search indexes (text and vector) and the listener that keeps them current.

State is built on first use after open by one prefix scan of the collection (under the
database lock, so no write slips between the scan and the first maintained write) and
then maintained by :class:`SearchListener`, one batch per commit (see listeners.py).
Nothing is persisted: after a crash or restart the indexes are rebuilt from the records,
so they can never be stale (an hnsw graph is rebuilt behind by its builder thread while
searches run exactly: vector/engine.py). A schema change (new text or vector index definitions) drops
the state; the next search rebuilds it.

Which text is indexed: the fields whose schema index is ``{"type": "text"}`` (each in
its ``language``); with no such field, every string field (top-level, in lists and in
nested maps as dotted paths) in English. Vector indexes: one per schema field with
``{"type": "vector", ...}`` (its algorithm, metric, m, ef_construction, ef_search,
dimension, and tuffdb's ``recall`` and ``full_scan_threshold_kb``; vector/engine.py),
plus a flat index built on demand the first time a request searches another
``(field, metric)`` pair. Only schema vector indexes refuse writes of the wrong
dimension; an on-demand index skips such records.
"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any

from tuffdb.documents.fulltext.postings import TextIndex
from tuffdb.documents.listeners import SearchHook
from tuffdb.documents.vector import as_vectors, check_metric, is_vector
from tuffdb.documents.vector.engine import VectorEngine
from tuffdb.errors import IntegrityError, ProtocolError

if TYPE_CHECKING:
    import numpy as np

    from tuffdb.documents.collection import Collection
    from tuffdb.documents.database import Database

SCAN_BATCH = 1000  # records per text-index batch while a state is built


class VectorSlot:
    """One vector field index; the dimension is fixed by the schema or the first vector."""

    def __init__(self, field: str, spec: dict[str, Any], *, declared: bool) -> None:
        self.field, self.spec, self.declared = field, spec, declared
        self.metric = check_metric(spec.get("metric", "cosine"))
        dim = spec.get("dimension")
        self.dimension: int | None = int(dim) if dim else None
        self.index: VectorEngine | None = None
        # (values, matrix) of the batch check_many validated last, for put_many
        self.checked: tuple[list[Any], np.ndarray] | None = None

    def check_many(self, records: list[dict[str, Any]]) -> set[int]:
        """The dimensions a batch would write to this field, after checking every vector.

        The converted matrix is kept for :meth:`put_many` of the same batch (one conversion).

        :raises IntegrityError: a declared field holding a non-vector, a vector of another
            dimension than the index's, or a NaN/infinite entry (nothing is written).
        """
        by_dim: dict[int, list[Any]] = {}
        for record in records:
            value = record.get(self.field)
            if value is None:
                continue
            if not is_vector(value):
                if self.declared:
                    raise IntegrityError(f"field '{self.field}' has a vector index; "
                                         "store a vector", condition=self.field)
                continue
            by_dim.setdefault(len(value), []).append(value)
        self.checked = None
        for dim, values in by_dim.items():
            data = as_vectors(values, self.dimension if self.dimension is not None else dim,
                              f"field '{self.field}'")
            self.checked = (values, data)
        return set(by_dim)

    def put_many(self, records: list[dict[str, Any]]) -> None:
        """Index the batch's vectors of this field; a record without one drops out."""
        rids: list[str] = []
        values: list[Any] = []
        for record in records:
            value: Any = record.get(self.field)
            if is_vector(value) and (self.dimension is None or len(value) == self.dimension):
                rids.append(record["id"])
                values.append(value)
            else:  # no vector, or a foreign dimension in an on-demand index (declared: refused)
                self.remove(record["id"])
        checked, self.checked = self.checked, None
        if (checked is not None and len(checked[0]) == len(values)
                and all(map(operator.is_, checked[0], values))):  # validated just before
            self.load(list(zip(rids, values, strict=True)), checked[1])
        else:
            self.load(list(zip(rids, values, strict=True)))

    def load(self, items: list[tuple[str, Any]], data: np.ndarray | None = None) -> None:
        """Index ``items``; ``data``: their vectors already converted (:func:`as_vectors`)."""
        if self.dimension is None and items:
            self.dimension = len(items[0][1])
        if data is None:
            items = [(r, v) for r, v in items if len(v) == self.dimension]
        if not items:
            return
        if self.index is None:
            assert self.dimension is not None
            self.index = VectorEngine(self.metric, self.dimension, self.spec)
        self.index.add_many(items, data)

    def remove(self, rid: str) -> None:
        if self.index is not None:
            self.index.remove(rid)


class SearchState:
    def __init__(self, coll: Collection) -> None:
        self.schema = coll.schema
        fields = coll.schema.fields if coll.schema is not None else {}
        text = {n: str(f.index.get("language") or "english") for n, f in fields.items()
                if f.index and f.index.get("type") == "text"}
        self.text = TextIndex(text or None, loader=coll.load)
        self.vectors: dict[tuple[str, str], VectorSlot] = {}
        for n, f in fields.items():
            if f.index and f.index.get("type") == "vector":
                slot = VectorSlot(n, f.index, declared=True)
                self.vectors[(n, slot.metric)] = slot
        vec_items: dict[tuple[str, str], list[tuple[str, Any]]] = {k: [] for k in self.vectors}
        batch: list[tuple[str, dict[str, Any]]] = []
        for record in coll._scan():  # noqa: SLF001 - the collection's own raw scan
            batch.append((record["id"], record))
            if len(batch) >= SCAN_BATCH:
                self.text.add_many(batch)
                batch.clear()
            for (name, _), items in vec_items.items():
                if is_vector(v := record.get(name)):
                    items.append((record["id"], v))
        self.text.add_many(batch)
        for key, items in vec_items.items():
            self.vectors[key].load(items)

    def vector_slot(self, coll: Collection, field: str, metric: str | None) -> VectorSlot:
        declared = [s for (f, _), s in self.vectors.items() if f == field]
        metric = check_metric(metric) if metric else (declared[0].metric if declared else "cosine")
        slot = self.vectors.get((field, metric))
        if slot is None:
            spec: dict[str, Any] = {"algorithm": "flat", "metric": metric}
            if declared:
                spec["dimension"] = declared[0].dimension
            slot = VectorSlot(field, spec, declared=False)
            slot.load([(r["id"], r[field]) for r in coll._scan() if is_vector(r.get(field))])  # noqa: SLF001
            self.vectors[(field, metric)] = slot
        return slot

    def default_vector_field(self, coll: Collection) -> str:
        for (field, _), slot in self.vectors.items():
            if slot.declared:
                return field
        for record in coll._scan():  # noqa: SLF001
            for k, v in record.items():
                if k != "id" and is_vector(v) and not all(isinstance(x, int) for x in v):
                    return k
        raise ProtocolError("no vector field found; name one with vector_field")


_STATES: weakref.WeakKeyDictionary[Collection, SearchState] = weakref.WeakKeyDictionary()


class SearchListener:
    """Keeps every built :class:`SearchState` of one database in step with its commits."""

    needs_kinds = False

    def __init__(self, db: Database) -> None:
        self.db = db

    def interested(self, collection: str) -> bool:
        coll = self.db._collections.get(collection)  # noqa: SLF001
        return coll is not None and coll in _STATES

    def _state(self, name: str, *, build: bool = False) -> SearchState | None:
        coll = self.db._collections.get(name)  # noqa: SLF001 - only collections in use have state
        if coll is None:
            return None
        return state_for(coll) if build else _STATES.get(coll)

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        coll = self.db._collections.get(collection)  # noqa: SLF001
        if coll is None or not _has_vector_schema(coll):
            return
        state = state_for(coll)
        for slot in state.vectors.values():
            if not slot.declared:
                continue
            dims = slot.check_many(records)
            if slot.dimension is None and len(dims) > 1:
                raise IntegrityError(f"vectors of {sorted(dims)} dimensions in one batch for "
                                     f"field '{slot.field}'", condition=slot.field)

    def close(self) -> None:
        """The database closes: stop the vector indexes' builder threads."""
        for coll in list(self.db._collections.values()):  # noqa: SLF001
            state = _STATES.get(coll)
            if state is not None:
                for slot in state.vectors.values():
                    if slot.index is not None:
                        slot.index.close()

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        state = self._state(collection)
        if state is None:
            return
        written = [*inserts, *updates]
        if written:
            state.text.add_many((r["id"], r) for r in written)
            for slot in state.vectors.values():
                slot.put_many(written)
        for rid in deletes:
            state.text.remove(rid)
            for slot in state.vectors.values():
                slot.remove(rid)


def _has_vector_schema(coll: Collection) -> bool:
    return coll.schema is not None and any(
        f.index and f.index.get("type") == "vector" for f in coll.schema.fields.values())


def attach(hook: SearchHook) -> None:
    """Make ``hook`` forward commits to this module (idempotent)."""
    if hook.delegate is None:
        hook.delegate = SearchListener(hook.db)


def state_for(coll: Collection) -> SearchState:
    """The collection's search state, built now if missing or out of date (takes db.lock)."""
    db = coll.db
    with db.lock:
        for listener in db.listeners:
            if isinstance(listener, SearchHook):
                attach(listener)
                break
        else:  # a database built without the hook: register a listener of our own
            hook = SearchHook(db)
            attach(hook)
            db.listeners.append(hook)
        state = _STATES.get(coll)
        if state is None or state.schema is not coll.schema:
            state = _STATES[coll] = SearchState(coll)
        return state
