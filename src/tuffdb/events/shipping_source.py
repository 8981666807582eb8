"""The event store's side of the log-shipping seam (storage/shipping.py).

What an event store directory holds for the seam: the sealed log segments
``log/<address>.log`` and their derived indexes ``index/<address>.idx`` (immutable
files), and the active segment ``log/<address>.log`` (the one log). The pause holds the
writer's commit lock: no drain is written, fsynced or rolled meanwhile (appends are
fsynced before they are acknowledged, so nothing acknowledged waits for a flush).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import ClosedError
from tuffdb.events.format import INDEX_SUFFIX
from tuffdb.storage.files import ID_DIGITS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.events.store import EventStore

LOG_DIR, INDEX_DIR = "log", "index"


class EventsSource:
    def __init__(self, store: EventStore) -> None:
        self._store = store

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        store = self._store
        if store.closed:
            raise ClosedError("the event store is closed: open it again")
        with store._writer._commit_lock:
            yield

    def state(self) -> tuple[list[str], dict[str, int]]:
        store = self._store
        segs = list(store._log.segments)
        files = [f"{LOG_DIR}/{s.path.name}" for s in segs[:-1]]
        index_dir = store.path / INDEX_DIR
        if index_dir.is_dir():
            for name in sorted(os.listdir(index_dir)):
                stem = name[: -len(INDEX_SUFFIX)]
                if name.endswith(INDEX_SUFFIX) and len(stem) == ID_DIGITS and stem.isdigit():
                    files.append(f"{INDEX_DIR}/{name}")
        last = segs[-1]
        return files, {f"{LOG_DIR}/{last.path.name}": SEGMENT_HEADER_SIZE + last.size}
