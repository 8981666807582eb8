"""Subscriptions: catch-up and live tail are one loop.

The cursor repeatedly reads ``(cursor, head]`` through the planner, then waits until the
head moves past the cursor. Because every pass reads against a head captured *before*
planning and the cursor only advances to what was read (or to that head), there is no
hand-over between catch-up and live mode, hence no gap and no duplicate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from tuffdb.events import codec
from tuffdb.events.api import SequencedEvent

if TYPE_CHECKING:
    from tuffdb.events.planner import Items
    from tuffdb.events.store import EventStore

BATCH = 1024


def next_positions(
    store: EventStore, items: Items | None, cursor: int, batch: int
) -> tuple[np.ndarray, int]:
    """The next positions after ``cursor`` and the cursor to continue from."""
    head = store._head
    if head <= cursor:
        return np.empty(0, np.int64), cursor
    pos = store._planner.positions(items, cursor + 1, head, limit=batch)
    if len(pos) == batch:
        return pos, int(pos[-1])
    return pos, head


class Subscription(Iterator[SequencedEvent]):
    """Blocking iterator over matching events; ``stop()`` (or ``with``) ends it."""

    def __init__(self, store: EventStore, items: Items | None, after: int) -> None:
        self._store = store
        self._items = items
        self._cursor = after
        self._buf: list[SequencedEvent] = []
        self._i = 0
        self._stopped = False

    @property
    def position(self) -> int:
        """The cursor: every matching event up to here has been fetched."""
        return self._cursor

    def __iter__(self) -> Subscription:
        return self

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped = True
        st = self._store
        with st._cv:
            st._cv.notify_all()

    def __next__(self) -> SequencedEvent:
        while self._i >= len(self._buf):
            self._fill()
        ev = self._buf[self._i]
        self._i += 1
        return ev

    def _fill(self) -> None:
        st = self._store
        while True:
            if self._stopped or st.closed:
                raise StopIteration
            pos, cursor = next_positions(st, self._items, self._cursor, BATCH)
            self._cursor = cursor
            if len(pos):
                self._buf = codec.decode_entries(st.join_entries(pos))
                self._i = 0
                return
            with st._cv:
                st._cv.wait_for(
                    lambda: st._head > self._cursor or self._stopped or st.closed
                )
