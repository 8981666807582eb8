"""The DCB event store face (see docs/design/events.md)."""

from tuffdb.events.api import (
    AppendCondition,
    Event,
    Query,
    QueryItem,
    ReadResponse,
    SequencedEvent,
    TrackingInfo,
)
from tuffdb.events.store import EventStore
from tuffdb.events.subscription import Subscription

__all__ = [
    "AppendCondition",
    "Event",
    "EventStore",
    "Query",
    "QueryItem",
    "ReadResponse",
    "SequencedEvent",
    "Subscription",
    "TrackingInfo",
]
