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
    from pathlib import Path

    from tuffdb.events.store import EventStore
    from tuffdb.storage.shipping import RemoteFile

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
        last = segs[-1]
        return list_state(store.path, [f"{LOG_DIR}/{s.path.name}" for s in segs[:-1]],
                          (f"{LOG_DIR}/{last.path.name}", SEGMENT_HEADER_SIZE + last.size))

    def remote(self) -> dict[str, RemoteFile]:
        return {}  # event segments are never tiered


def list_state(path: Path, sealed: list[str] | None = None,
               active: tuple[str, int] | None = None) -> tuple[list[str], dict[str, int]]:
    """The immutable files of an event store directory (``sealed`` segments and every
    index file) and its active log's committed end. Without ``sealed`` and ``active``
    (a closed store): every segment in ``log/`` but the newest is sealed, and the newest
    counts to its file size (recovery decides what of it counts)."""
    if sealed is None:
        log_dir = path / LOG_DIR
        names = sorted(n for n in os.listdir(log_dir) if _is_id(n, ".log")) \
            if log_dir.is_dir() else []
        sealed = [f"{LOG_DIR}/{n}" for n in names[:-1]]
        if names:
            active = (f"{LOG_DIR}/{names[-1]}", os.stat(log_dir / names[-1]).st_size)
    files = list(sealed)
    index_dir = path / INDEX_DIR
    if index_dir.is_dir():
        files += [f"{INDEX_DIR}/{n}" for n in sorted(os.listdir(index_dir))
                  if _is_id(n, INDEX_SUFFIX)]
    return files, dict([active] if active is not None else [])


def _is_id(name: str, suffix: str) -> bool:
    stem = name[: -len(suffix)]
    return name.endswith(suffix) and len(stem) == ID_DIGITS and stem.isdigit()
