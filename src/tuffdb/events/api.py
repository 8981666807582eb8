"""Public value types of the DCB event store (names from the DCB spec and UmaDB).

Positions start at 1 and are gapless. ``after`` is always *exclusive* (conditions,
subscriptions); ``start`` is *inclusive* (reads, as in UmaDB's ``ReadRequest.start``).
The one mapping between them lives here: ``start = after + 1`` (:func:`after_to_start`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

__all__ = [
    "AppendCondition",
    "Event",
    "Query",
    "QueryItem",
    "ReadResponse",
    "SequencedEvent",
    "TrackingInfo",
    "after_to_start",
]


@dataclass(slots=True)
class Event:
    """An event to append: ``type``, opaque ``data``, ``tags`` (AND-matched by queries).

    ``uuid`` (a :class:`uuid.UUID` or its string, or ``None``) makes a conditional append
    idempotent on retry; ``metadata`` is an ordered ``str -> str`` mapping.
    """

    type: str
    data: bytes | bytearray | memoryview
    tags: Sequence[str] = ()
    uuid: str | UUID | None = None
    metadata: Mapping[str, str] | None = None


@dataclass(slots=True)
class TrackingInfo:
    """Position ``position`` of upstream ``source``, stored atomically with an append."""

    source: str
    position: int


@dataclass(slots=True)
class SequencedEvent:
    """An event with its position (and the tracking info it was written with, if any)."""

    event: Event
    position: int
    tracking_info: TrackingInfo | None = None


@dataclass(slots=True)
class QueryItem:
    """Matches an event whose type is one of ``types`` (any if empty) and that carries
    every tag in ``tags`` (no constraint if empty)."""

    types: Sequence[str] = ()
    tags: Sequence[str] = ()


@dataclass(slots=True)
class Query:
    """Items are OR'ed; a query with no items matches every event."""

    items: Sequence[QueryItem] = ()

    @classmethod
    def all(cls) -> Query:
        return cls(())


@dataclass(slots=True)
class AppendCondition:
    """Fail the append if any event after ``after`` (exclusive; ``None`` = all history)
    matches ``fail_if_events_match`` (an empty query matches everything)."""

    fail_if_events_match: Query = field(default_factory=Query)
    after: int | None = None


def after_to_start(after: int | None) -> int | None:
    """The inclusive read ``start`` equivalent to the exclusive ``after``."""
    return None if after is None else after + 1


class ReadResponse(Iterator[SequencedEvent]):
    """Iterator over a read's events; ``head`` is fixed when the read starts.

    Without a limit ``head`` is the store's head at the start of the read (``None`` when
    empty); with a limit it is the position of the last event the read returns (``None``
    when it returns nothing), exactly as UmaDB and eventsourcing define it.
    """

    __slots__ = ("_it", "head")

    def __init__(self, events: Iterator[SequencedEvent], head: int | None) -> None:
        self._it = events
        self.head = head

    def __iter__(self) -> ReadResponse:
        return self

    def __next__(self) -> SequencedEvent:
        return next(self._it)
