"""The KV store's side of the log-shipping seam (storage/shipping.py).

What a KV directory holds for the seam: immutable files ``<id>.dat`` and ``<id>.hint``
(cold segments and their key tables), and logs ``<id>.log`` (hot-tier logs, one per hot
segment, deleted once the segment is spilled). A tiered segment's ``<id>.dat`` is part
of the state too, held in the archive (``remote()``; its local stub ``<id>.tier`` is
not). Spares (``spare-*.tmp``), other ``.tmp`` files, the tier cache and ``LOCK`` are not
part of the state.

The pause holds the background mutex (no spill or merge adds or deletes a cold file)
and the group committer between rounds, after running one (every write so far is in a
log). An unlogged store (``durability="none"``) is spilled first: its hot tier reaches
disk no other way.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.storage.files import ID_DIGITS

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tuffdb.kv.store import KVStore
    from tuffdb.storage.shipping import RemoteFile

FILE_SUFFIXES = ("dat", "hint")
LOG_SUFFIX = "log"


def kind_of(name: str) -> str | None:
    """``"file"``, ``"log"`` or None (not part of a KV directory's state)."""
    stem, _, suffix = name.partition(".")
    if len(stem) != ID_DIGITS or not stem.isdigit():
        return None
    if suffix in FILE_SUFFIXES:
        return "file"
    return "log" if suffix == LOG_SUFFIX else None


class KVSource:
    def __init__(self, store: KVStore) -> None:
        self._store = store

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        store = self._store
        store._require_open()
        if not store._logged:
            store.sync()
        with store._bg_mutex, store._committer.exclusive():
            yield

    def state(self) -> tuple[list[str], dict[str, int]]:
        store = self._store
        open_logs = {seg.wal.path.name: SEGMENT_HEADER_SIZE + seg.wal.size
                     for seg in list(store._unflushed)
                     if seg.wal is not None and not seg.wal.closed}
        return list_state(store._dir, open_logs)

    def remote(self) -> dict[str, RemoteFile]:
        from tuffdb.kv.tier import TieredSegment  # noqa: PLC0415 - tier imports this module's users

        return {s.path.name: s.ref for s in self._store._cold_order
                if isinstance(s, TieredSegment)}


def list_state(directory: Path, open_logs: dict[str, int]) -> tuple[list[str], dict[str, int]]:
    """The immutable files of a KV directory and each log's committed end: from
    ``open_logs`` for the logs a store is writing, else the file's size (a closed
    store's log: recovery decides what of it counts)."""
    files: list[str] = []
    logs: dict[str, int] = {}
    for name in sorted(os.listdir(directory)):
        kind = kind_of(name)
        if kind == "file":
            files.append(name)
        elif kind == "log":
            size = open_logs.get(name)
            logs[name] = size if size is not None else os.stat(directory / name).st_size
    return files, logs
