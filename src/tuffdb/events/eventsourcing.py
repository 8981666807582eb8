"""eventsourcing 9.5.x integration: a ``DCBRecorder`` over the embedded :class:`EventStore`.

    from tuffdb.events.eventsourcing import TuffDBDCBRecorder
    recorder = TuffDBDCBRecorder(EventStore.open(path))

eventsourcing's ``after`` is exclusive; our reads take an inclusive ``start``, so
``start = after + 1`` (:func:`tuffdb.events.api.after_to_start`). Conflicts raise
``eventsourcing.persistence.IntegrityError``. ``TuffDBDCBFactory`` plugs the recorder into
eventsourcing's infrastructure (``PERSISTENCE_MODULE=tuffdb.events.eventsourcing`` with
``TUFFDB_EVENTS_PATH``).

Optional: needs the ``eventsourcing`` extra (``pip install 'tuffdb[eventsourcing]'``);
without it, importing this module raises ``ImportError`` saying so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

try:
    from eventsourcing.dcb.api import (
        DCBAppendCondition,
        DCBEvent,
        DCBQuery,
        DCBReadResponse,
        DCBRecorder,
        DCBSequencedEvent,
        DCBSubscription,
    )
    from eventsourcing.persistence import IntegrityError as ESIntegrityError
except ImportError as exc:  # pragma: no cover (the message is checked by the packaging test)
    raise ImportError(
        "tuffdb.events.eventsourcing needs the eventsourcing package: "
        "pip install 'tuffdb[eventsourcing]'", name=exc.name) from exc

from tuffdb.errors import IntegrityError
from tuffdb.events.api import AppendCondition, Event, Query, QueryItem, after_to_start
from tuffdb.events.store import EventStore
from tuffdb.events.subscription import Subscription


def _query(q: DCBQuery | None) -> Query | None:
    if q is None or not q.items:
        return None
    return Query([QueryItem(i.types, i.tags) for i in q.items])


def _sequenced(se: Any) -> DCBSequencedEvent:
    e = se.event
    return DCBSequencedEvent(DCBEvent(e.type, e.data, list(e.tags)), se.position)


class _ReadResponse(DCBReadResponse):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def head(self) -> int | None:
        result: int | None = self._inner.head
        return result

    def __next__(self) -> DCBSequencedEvent:
        return _sequenced(next(self._inner))


class TuffDBDCBSubscription(DCBSubscription["TuffDBDCBRecorder"]):
    def __init__(
        self, recorder: TuffDBDCBRecorder, query: DCBQuery | None = None,
        after: int | None = None,
    ) -> None:
        super().__init__(recorder, query, after)
        self._sub: Subscription = recorder.store.subscribe(_query(query), after)

    def stop(self) -> None:
        super().stop()
        self._sub.stop()

    def __next__(self) -> DCBSequencedEvent:
        return _sequenced(next(self._sub))


class TuffDBDCBRecorder(DCBRecorder):
    """``DCBRecorder`` backed by an embedded :class:`EventStore`."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def read(
        self, query: DCBQuery | None = None, *, after: int | None = None,
        limit: int | None = None,
    ) -> DCBReadResponse:
        return _ReadResponse(self.store.read(_query(query), after_to_start(after), limit=limit))

    def append(
        self, events: Sequence[DCBEvent], condition: DCBAppendCondition | None = None
    ) -> int:
        cond = None
        if condition is not None:
            cond = AppendCondition(
                _query(condition.fail_if_events_match) or Query(), condition.after
            )
        try:
            return self.store.append([Event(e.type, e.data, e.tags) for e in events], cond)
        except IntegrityError as exc:
            raise ESIntegrityError(condition) from exc

    def subscribe(
        self, query: DCBQuery | None = None, *, after: int | None = None
    ) -> TuffDBDCBSubscription:
        return TuffDBDCBSubscription(self, query, after)


try:  # The factory needs eventsourcing's DCB persistence module (9.5.x).
    from eventsourcing.dcb.persistence import DCBInfrastructureFactory
    from eventsourcing.popo import POPOFactory, POPOTrackingRecorder

    class TuffDBDCBFactory(POPOFactory, DCBInfrastructureFactory[POPOTrackingRecorder]):
        """Infrastructure factory: DCB recorder on a tuffdb store at $TUFFDB_EVENTS_PATH."""

        def dcb_recorder(self) -> DCBRecorder:
            path = self.env.get("TUFFDB_EVENTS_PATH") or os.environ.get("TUFFDB_EVENTS_PATH")
            if not path:
                from tuffdb.errors import ProgrammingError  # noqa: PLC0415

                raise ProgrammingError("set TUFFDB_EVENTS_PATH to the event store directory")
            return TuffDBDCBRecorder(EventStore.open(path))

    Factory = TuffDBDCBFactory
except ImportError:  # pragma: no cover
    pass

__all__ = ["TuffDBDCBRecorder", "TuffDBDCBSubscription"]
