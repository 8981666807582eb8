"""``collection.watch(filter=None)``: the collection's committed mutations, in commit order.

Each event is a dict shaped like ekoDB's ``MutationNotification`` payload::

    {"collection": "users", "event": "insert" | "update" | "delete",
     "record_ids": ["..."], "records": [{...}], "timestamp": "2026-11-30T12:00:00.123456Z"}

(``records`` only for insert and update: the full records after the write). One commit
gives at most one event per kind, in the order insert, update, delete. A ``filter`` (the
query language, or ``field=value`` via ``filter_field``/``filter_value``) narrows insert
and update events to matching records and drops events left empty; deletes always pass
(the record is gone, there is nothing to test).

With ``schema_events=True`` a schema change of the collection also arrives, as
``{"collection", "event": "schema_changed", "version", "primary_key_alias"}`` (the
servers turn it into ``SchemaChanged`` / ``event: schema_changed``).

Writers never wait for watchers: the hub appends to each subscriber's buffer under the
database lock and returns. A subscriber with ``max_buffered`` events not yet taken is
disconnected at once: its buffer is dropped and its next read raises
:class:`~tuffdb.errors.OperationalError` saying why. In ``durability="always"`` mode an
event is handed out only once its write is fsynced (``kv.when_durable``).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Self

from tuffdb.documents.query import compile_node, parse
from tuffdb.documents.values import format_datetime
from tuffdb.errors import ClosedError, OperationalError

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.documents.collection import Collection
    from tuffdb.documents.database import Database

DEFAULT_MAX_BUFFERED = 10_000
_DB_CLOSED = "database closed"


class Subscription:
    """One watcher; iterate it, or ``get(timeout)``; ``close()`` when done."""

    def __init__(self, hub: WatchHub, collection: str,
                 predicate: Callable[[dict[str, Any]], bool] | None, max_buffered: int,
                 *, schema_events: bool = False) -> None:
        self.hub, self.collection, self.predicate = hub, collection, predicate
        self.schema_events = schema_events
        self.max_buffered = max_buffered
        self.buffer: deque[tuple[dict[str, Any], int | None]] = deque()
        self.cond = threading.Condition(threading.Lock())
        self.closed_reason: str | None = None
        self.notify: Callable[[], None] | None = None  # set by async servers

    # --- writer side (under the database lock; never blocks) ------------------------
    def offer(self, event: dict[str, Any], ticket: int | None) -> bool:
        """Buffer ``event``; False when this subscriber was cut off (or is closed)."""
        if event["event"] in ("insert", "update") and self.predicate is not None:
            keep = [i for i, r in enumerate(event["records"]) if self.predicate(r)]
            if not keep:
                return True
            if len(keep) != len(event["records"]):
                event = {**event, "record_ids": [event["record_ids"][i] for i in keep],
                         "records": [event["records"][i] for i in keep]}
        with self.cond:
            if self.closed_reason is not None:
                return False
            if len(self.buffer) >= self.max_buffered:
                self.buffer.clear()
                self.closed_reason = (f"subscriber fell behind: {self.max_buffered} events were "
                                      "waiting, so it was disconnected (writers never wait); "
                                      "watch again and re-read the collection to catch up")
                ok = False
            else:
                self.buffer.append((event, ticket))
                ok = True
            self.cond.notify_all()
        if self.notify is not None:
            self.notify()
        return ok

    # --- reader side ---------------------------------------------------------------
    def poll(self) -> tuple[dict[str, Any], int | None] | None:
        """The next ``(event, durability ticket)`` without waiting, or None.

        :raises OperationalError: when the subscriber was disconnected for falling behind.
        :raises ClosedError: after ``close()``.
        """
        with self.cond:
            if self.buffer:
                return self.buffer.popleft()
            self._raise_if_closed()
            return None

    def _raise_if_closed(self) -> None:
        if self.closed_reason == "closed":
            raise ClosedError("this subscription is closed; call watch() again")
        if self.closed_reason == _DB_CLOSED:
            raise ClosedError("the database was closed: this subscription ended with it")
        if self.closed_reason is not None:
            raise OperationalError(self.closed_reason)

    def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event (None if ``timeout`` seconds pass first); durable in "always" mode."""
        with self.cond:
            if not self.buffer and self.closed_reason is None:
                self.cond.wait(timeout)
            if not self.buffer:
                self._raise_if_closed()
                return None
            event, ticket = self.buffer.popleft()
        self.hub.wait_durable(ticket)
        return event

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> dict[str, Any]:
        try:
            event = self.get()
        except ClosedError:
            raise StopIteration from None
        assert event is not None
        return event

    def close(self) -> None:
        self._end("closed")
        self.hub.remove(self)

    def _end(self, reason: str) -> None:
        """Stop: pending events are dropped, a waiting reader wakes and is told ``reason``."""
        with self.cond:
            if self.closed_reason is None:
                self.closed_reason = reason
            self.buffer.clear()
            self.cond.notify_all()
        if self.notify is not None:
            self.notify()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WatchHub:
    """The database's watch listener (registered in ``db.listeners`` on first watch)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.subs: dict[str, list[Subscription]] = {}

    needs_kinds = True

    def interested(self, collection: str) -> bool:
        return collection in self.subs

    def validate(self, collection: str, records: list[dict[str, Any]]) -> None:
        pass

    def on_commit(self, collection: str, inserts: list[dict[str, Any]],
                  updates: list[dict[str, Any]], deletes: list[str]) -> None:
        subs = self.subs.get(collection)
        if not subs:
            return
        kv = self.db.kv
        ticket = kv.write_ticket() if hasattr(kv, "write_ticket") else None
        stamp = format_datetime(dt.datetime.now(dt.UTC))
        for kind, items in (("insert", inserts), ("update", updates), ("delete", deletes)):
            if not items:
                continue
            ids = [r if isinstance(r, str) else r["id"] for r in items]
            event: dict[str, Any] = {"collection": collection, "event": kind,
                                     "record_ids": ids, "timestamp": stamp}
            if kind != "delete":
                event["records"] = items
            for sub in list(subs):
                if not sub.offer(event, ticket):
                    self.remove(sub)

    def on_schema(self, collection: str, schema: Any) -> None:
        subs = [s for s in self.subs.get(collection, ()) if s.schema_events]
        if not subs:
            return
        event = {"collection": collection, "event": "schema_changed",
                 "version": 0 if schema is None else schema.version,
                 "primary_key_alias": "id" if schema is None else schema.primary_key_alias}
        for sub in subs:
            if not sub.offer(event, None):
                self.remove(sub)

    def wait_durable(self, ticket: int | None) -> None:
        kv = self.db.kv
        if ticket is not None and getattr(kv, "durability", None) == "always":
            kv.when_durable(ticket).result()

    def add(self, sub: Subscription) -> None:
        with self.db.lock:
            self.subs.setdefault(sub.collection, []).append(sub)

    def close(self) -> None:
        """The database is closing: every subscription ends, and a reader waiting in
        ``get()`` or iterating wakes (``ClosedError``; iteration simply stops)."""
        with self.db.lock:
            subs = [sub for group in self.subs.values() for sub in group]
            self.subs.clear()
        for sub in subs:
            sub._end(_DB_CLOSED)  # noqa: SLF001 - the hub owns its subscriptions

    def remove(self, sub: Subscription) -> None:
        with self.db.lock:
            subs = self.subs.get(sub.collection, [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self.subs.pop(sub.collection, None)


def hub_for(db: Database) -> WatchHub:
    with db.lock:
        for listener in db.listeners:
            if isinstance(listener, WatchHub):
                return listener
        hub = WatchHub(db)
        db.listeners.append(hub)
        return hub


def predicate_of(filter: Any = None, filter_field: str | None = None,  # noqa: A002
                 filter_value: Any = None) -> Callable[[dict[str, Any]], bool] | None:
    if filter_field is not None:
        filter = {"type": "Condition",  # noqa: A001
                  "content": {"field": filter_field, "operator": "Eq", "value": filter_value}}
    node = parse(filter)
    return None if node is None else compile_node(node)


def watch(coll: Collection, filter: Any = None, *, filter_field: str | None = None,  # noqa: A002, PLR0913 - the ekoDB subscription options
          filter_value: Any = None, max_buffered: int = DEFAULT_MAX_BUFFERED,
          schema_events: bool = False) -> Subscription:
    """Subscribe to ``coll``'s mutations from now on (see the module docstring).

    :raises ProtocolError: on a malformed filter.
    """
    sub = Subscription(hub_for(coll.db), coll.name,
                       predicate_of(filter, filter_field, filter_value), max_buffered,
                       schema_events=schema_events)
    sub.hub.add(sub)
    return sub
