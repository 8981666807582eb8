"""Transactions: staged writes, read-your-writes, commit-time conflict detection, savepoints.

Optimistic concurrency. A transaction stages its writes in memory (nothing reaches the
store before commit) and records what it read. Every commit, transactional or not,
stamps the records it wrote with a new sequence number. At commit the transaction is
checked against everything committed since it began, under the database's write lock:

=================  ====================================================================
isolation          guarantee here
=================  ====================================================================
ReadUncommitted    reads see the latest *committed* state plus own writes (uncommitted
ReadCommitted      writes of others are never visible); commit fails if another commit
                   since begin wrote a record this transaction writes (first committer
                   wins: no lost updates). ReadCommitted is the default.
RepeatableRead     as above, and a record read twice reads the same (the first read is
                   kept), and commit fails if any record read changed since begin: the
                   committed transaction saw a snapshot (snapshot isolation, stronger:
                   write skew on read records is also caught)
Serializable       as RepeatableRead, and commit fails if a collection it ran a query on
                   had any commit since begin (phantoms): serializable
=================  ====================================================================

A losing commit raises :class:`tuffdb.errors.ConflictError` (HTTP 409) and writes
nothing; retry the whole transaction. A transaction past its timeout is rolled back and
raises :class:`tuffdb.errors.OperationalError`. Conflict bookkeeping is in memory: a
transaction does not survive a restart.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Self

from tuffdb.documents.collection import Write
from tuffdb.documents.query import compile_node, parse
from tuffdb.documents.shape import page, parse_sort, project, sort_records
from tuffdb.errors import (
    ConflictError,
    IntegrityError,
    NotFoundError,
    OperationalError,
    ProgrammingError,
    ProtocolError,
)

if TYPE_CHECKING:
    from tuffdb.documents.database import Database

ISOLATION_LEVELS = ("ReadUncommitted", "ReadCommitted", "RepeatableRead", "Serializable")
_BY_LOWER = {name.lower(): name for name in ISOLATION_LEVELS}


def canonical_isolation(name: str | None) -> str:
    if name is None:
        return "ReadCommitted"
    level = _BY_LOWER.get(str(name).replace("_", "").replace(" ", "").lower())
    if level is None:
        raise ProtocolError(f"unknown isolation level {name!r}; use one of {ISOLATION_LEVELS}")
    return level


class Transaction:
    """Begin with :meth:`Database.transaction`; use as a context manager to commit on exit."""

    def __init__(self, db: Database, *, isolation: str | None = None, timeout: float = 300.0) -> None:  # noqa: E501
        self.db = db
        self.id = str(uuid.uuid4())
        self.isolation = canonical_isolation(isolation)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.state = "Active"
        self.writes: dict[tuple[str, str], Write] = {}
        self.reads: set[tuple[str, str]] = set()
        self.scans: set[str] = set()
        self.snapshot: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.savepoints: list[tuple[str, dict[tuple[str, str], Write]]] = []
        self.operations = 0
        self.owner: str | None = None  # who began it, where a server tells (ekoDB: its key)
        with db.lock:
            self.start_seq = db.seq
            db.active_transactions[self.id] = self

    # --- state ------------------------------------------------------------------------
    def _check_active(self) -> None:
        if self.state == "TooOld":
            raise ConflictError(f"transaction {self.id} was ended: more writes committed while "
                                "it was open than the database keeps track of "
                                f"({self.db.tracked_versions:,} records); retry the "
                                "transaction")
        if self.state != "Active":
            raise ProgrammingError(f"transaction {self.id} is {self.state}; begin a new one")
        if time.monotonic() > self.deadline:
            self._end("TimedOut")
            raise OperationalError(f"transaction {self.id} timed out after {self.timeout} s; retry it")  # noqa: E501

    def _end(self, state: str) -> None:
        self.state = state
        self.db.active_transactions.pop(self.id, None)

    def status(self) -> dict[str, Any]:
        return {"transaction_id": self.id, "state": self.state, "isolation_level": self.isolation,
                "operations_count": self.operations, "savepoints": [n for n, _ in self.savepoints]}

    # --- reads ------------------------------------------------------------------------
    def get(self, collection: str, rid: str) -> dict[str, Any] | None:
        """Record ``rid`` as this transaction sees it (own writes first), or None."""
        self._check_active()
        return self._read(collection, rid)

    def _read(self, collection: str, rid: str) -> dict[str, Any] | None:
        key = (collection, rid)
        w = self.writes.get(key)
        if w is not None:
            return None if w.fields is None else {"id": rid, **w.fields}
        if key in self.snapshot:
            return self.snapshot[key]
        record = self.db.collection(collection).load(rid)
        self.reads.add(key)
        if self.isolation in ("RepeatableRead", "Serializable"):
            self.snapshot[key] = record
        return record

    def find(self, collection: str, filter: Any = None, *, sort: Any = None,  # noqa: A002, PLR0913 - type or option dispatch, one case each
             skip: int | None = None, limit: int | None = None,
             select: list[str] | None = None, exclude: list[str] | None = None) -> list[dict[str, Any]]:  # noqa: E501
        """Like :meth:`Collection.find`, over the committed state plus staged writes."""
        self._check_active()
        node = parse(filter)
        pred = compile_node(node)
        base, _ = self.db.collection(collection).matches(node)
        self.scans.add(collection)
        out: dict[str, dict[str, Any]] = {}
        for record in base:
            seen = self._read(collection, record["id"])
            if seen is not None and pred(seen):
                out[seen["id"]] = seen
        for (cname, rid), w in self.writes.items():
            if cname == collection:
                staged = None if w.fields is None else {"id": rid, **w.fields}
                if staged is not None and pred(staged):
                    out[rid] = staged
                else:
                    out.pop(rid, None)
        records = sort_records([out[k] for k in sorted(out)], parse_sort(sort))
        return [project(r, select, exclude) for r in page(records, skip, limit)]

    # --- writes (staged) --------------------------------------------------------------
    def _stage(self, w: Write) -> None:
        self.writes[(w.collection, w.id)] = w
        self.operations += 1

    def insert(self, collection: str, record: dict[str, Any], *, ttl: Any = None) -> str:
        self._check_active()
        w = self.db.collection(collection).prepare(record, ttl=ttl)
        if self._read(collection, w.id) is not None:
            raise IntegrityError(f"a record with id '{w.id}' exists", condition="id")
        self._stage(w)
        return w.id

    def update(self, collection: str, rid: str, changes: dict[str, Any]) -> dict[str, Any]:
        self._check_active()
        old = self._read(collection, rid)
        if old is None:
            raise NotFoundError(f"no record '{rid}' in '{collection}'")
        w = self.db.collection(collection).update_write(old, changes)
        self._stage(w)
        return {"id": rid, **(w.fields or {})}

    def delete(self, collection: str, rid: str) -> dict[str, Any]:
        self._check_active()
        old = self._read(collection, rid)
        if old is None:
            raise NotFoundError(f"no record '{rid}' in '{collection}'")
        self._stage(Write(collection, rid, None))
        return old

    # --- savepoints -------------------------------------------------------------------
    def savepoint(self, name: str) -> None:
        self._check_active()
        self.savepoints.append((name, dict(self.writes)))

    def _find_savepoint(self, name: str) -> int:
        for i in range(len(self.savepoints) - 1, -1, -1):
            if self.savepoints[i][0] == name:
                return i
        raise NotFoundError(f"no savepoint '{name}' in transaction {self.id}")

    def rollback_to(self, name: str) -> None:
        """Undo the writes staged after savepoint ``name`` (which stays)."""
        self._check_active()
        i = self._find_savepoint(name)
        self.writes = dict(self.savepoints[i][1])
        del self.savepoints[i + 1 :]

    def release(self, name: str) -> None:
        """Forget savepoint ``name`` and those after it (the writes stay)."""
        self._check_active()
        del self.savepoints[self._find_savepoint(name) :]

    # --- end --------------------------------------------------------------------------
    def commit(self) -> None:
        """Apply every staged write atomically, or raise ConflictError and apply none."""
        db = self.db
        with db.lock:
            self._check_active()
            try:
                self._validate()
                if self.writes:
                    db.collection(next(iter(self.writes))[0]).commit(list(self.writes.values()))
            except ConflictError:
                self._end("Aborted")
                raise
            except Exception:
                self._end("Failed")
                raise
            self._end("Committed")

    def _validate(self) -> None:
        db, start = self.db, self.start_seq
        checked = list(self.writes)
        if self.isolation in ("RepeatableRead", "Serializable"):
            checked.extend(self.reads)
        for key in checked:
            if db.versions.get(key, 0) > start:
                raise ConflictError(f"transaction {self.id}: record '{key[1]}' in '{key[0]}' "
                                    "was changed by another commit; retry the transaction")
        if self.isolation == "Serializable":
            for coll in self.scans:
                if db.collection_versions.get(coll, 0) > start:
                    raise ConflictError(f"transaction {self.id}: collection '{coll}' changed "
                                        "since the transaction read it; retry the transaction")

    def rollback(self) -> None:
        """Discard every staged write (idempotent once ended)."""
        if self.state == "Active":
            self.writes.clear()
            self._end("RolledBack")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None and self.state == "Active":
            self.commit()
        else:
            self.rollback()
