"""Taking a backup: a snapshot of every store, copied to a target, manifest last.

Consistency is per store: each store's snapshot is taken between two of its commit
rounds (``Shipper.snapshot``), after a round that made every earlier write durable, so
the backup holds every write acknowledged before the snapshot and none begun after it.
Stores are snapshotted one after another, microseconds to milliseconds apart; each
store's instant is in the manifest. Writers are held only for the snapshot's pause
(one hard link per file); the copying runs from the links, beside the writers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tuffdb._failpoints import failpoint
from tuffdb._format.kv import TRAILER_SIZE
from tuffdb.backup.manifest import CHECK_FRAMES, MANIFEST_KEY, FileEntry, Manifest, StoreEntry
from tuffdb.backup.progress import Progress
from tuffdb.errors import OperationalError
from tuffdb.kv.cold import DATA_SUFFIX
from tuffdb.storage.copy import Throttle, file_crc, frames_digest
from tuffdb.storage.objstore import PreconditionFailed
from tuffdb.storage.pacing import PacedThrottle

if TYPE_CHECKING:
    from tuffdb.storage.objstore import ObjectStore
    from tuffdb.storage.shipping import Shipper, Snapshot

STAGING_DIR = ".backup-staging"
#: Files copied (or uploaded, or fetched) at once, and by a backup, which shares the
#: disk with the store it copies (each of its threads keeps a write of up to
#: storage.copy.DIRECT_SLICE in the disk's queue).
COPY_THREADS = 4
BACKUP_THREADS = 2
#: The nice value of an online backup's and the archiver's copy threads (Linux: a
#: per-thread value). Their copies run in the kernel without the GIL, so at the default
#: priority four of them are four runnable threads beside the one serving requests, and
#: the scheduler splits a core between them: a server under a durable load kept 0.2x of
#: its throughput during a backup while its disk answered fsyncs as fast as before
#: (measured). Niced, they take what the store's threads leave.
BACKGROUND_NICE = 19
T = TypeVar("T")


@dataclass
class Source:
    """One store to back up: its subdirectory name, kind, shipper and key id; ``store``
    the open store itself (what the archiver tiers), None for a locked directory."""

    name: str
    kind: str
    shipper: Shipper
    key_id: int
    store: Any = None


def frames_trailer(store_kind: str, name: str, kind: str) -> int | None:
    """For a file checked by its own frames (``check: "frames"``, docs/format/backup.md),
    the raw bytes after its last frame; None for a file checked by a CRC of its bytes.
    Frames: a KV cold segment (16-byte trailer) and a sealed event log segment (none):
    the bulk of a store, whose payloads their frame CRCs already cover."""
    if kind != "file":
        return None
    if store_kind == "kv" and name.endswith(DATA_SUFFIX):
        return TRAILER_SIZE
    if store_kind == "events" and name.startswith("log/"):
        return 0
    return None


def upload_snapshot(target: ObjectStore, snap: Snapshot, prefix: str, *, link: bool = False,
                    progress: Progress | None = None, known: dict[str, FileEntry] | None = None,
                    store_kind: str = "", throttle: Throttle | None = None,
                    threads: int = COPY_THREADS) -> list[FileEntry]:
    """Upload every file of ``snap`` under ``prefix`` (logs cut at their positions), on
    ``threads`` threads; files whose name and checksum are in ``known`` are not
    uploaded again, nor tiered files whose object is in ``target`` already (a snapshot
    taken with ``fetch_remote=False``). Without ``known`` (a backup), the big immutable
    files of a ``store_kind`` store are checked by their frames (:func:`frames_trailer`),
    the rest by a CRC-32C of their bytes; an archive (``known``) names objects by a CRC of
    their bytes. Entries come back in the snapshot's order."""

    def one(name: str, size: int, kind: str) -> FileEntry:
        ref = snap.remote.get(name)
        if ref is not None and ref.url == target.url:
            # Tiered: its bytes are already an object of this archive (same content, the
            # object's name carries its checksum): list that one.
            return FileEntry(name, ref.size, ref.crc32c, "file", ref.object)
        if ref is not None:  # tiered into another archive: fetch it, then copy it here
            path = snap.staging / f".remote-{uuid.uuid4().hex}"
            ref.fetch(path)
            try:
                return upload(name, path, ref.size, "file")
            finally:
                path.unlink(missing_ok=True)
        return upload(name, snap.path(name), size, kind)

    def upload(name: str, path: Path, size: int, kind: str) -> FileEntry:
        if known is not None:  # an archive: objects are named by content, and shared
            crc, got = file_crc(path, size if kind == "log" else None)
            have = known.get(name)
            if kind == "file" and have is not None and (have.crc32c, have.size) == (crc, got):
                return have
            key = f"{prefix}{name}.{crc:08x}"
            with contextlib.suppress(PreconditionFailed):  # the same content is there
                target.put_file(key, path, size=got, if_none_match=True)
            return FileEntry(name, got, crc, kind, key)
        key = f"{prefix}{name}"
        trailer = frames_trailer(store_kind, name, kind)
        crc, got = target.put_file(key, path, size=size if kind == "log" else None,
                                   link=link and kind == "file", if_none_match=True,
                                   crc=trailer is None, throttle=throttle)
        if trailer is None:
            return FileEntry(name, got, crc, kind, key)
        digest, got = frames_digest(path, trailer)
        return FileEntry(name, got, digest, kind, key, CHECK_FRAMES, trailer)

    return run_parallel(one, snap.files, progress, [f[1] for f in snap.files], threads=threads)


def background_thread() -> None:
    """Lower the calling thread's CPU priority to :data:`BACKGROUND_NICE` (where the
    system has per-thread nice values; a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def run_parallel(fn: Callable[..., T], items: Sequence[tuple[Any, ...]],
                 progress: Progress | None = None, sizes: Sequence[int] = (), *,
                 background: bool = True, threads: int = COPY_THREADS) -> list[T]:
    """``[fn(*item) for item in items]`` on ``threads`` threads (the copies and
    fsyncs release the GIL, so one file's fsync overlaps the next one's copy), results
    in order; the first failure cancels what has not started and is raised.
    ``background``: the threads yield the CPU to the rest (:func:`background_thread`);
    false for work nothing runs beside (a restore)."""
    if len(items) <= 1 and not background:
        out = [fn(*item) for item in items]
        if progress is not None:
            progress.add(sum(sizes))
        return out
    results: list[Any] = [None] * len(items)
    with ThreadPoolExecutor(threads, thread_name_prefix="tuffdb-copy",
                            initializer=background_thread if background else None) as pool:
        futures = {pool.submit(fn, *item): i for i, item in enumerate(items)}
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if progress is not None and sizes:
                    progress.add(sizes[i])
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return results


def take_backup(sources: list[Source], target: ObjectStore, staging_root: Path, *,
                extra: list[tuple[str, Path]] = (), link: bool = False,  # type: ignore[assignment]
                progress: Progress | None = None,
                max_bytes_per_s: float | None = None, pace: bool = False) -> Manifest:
    """Back up ``sources`` to ``target`` (which must be empty); return the manifest.
    ``max_bytes_per_s`` bounds the copying rate (what it takes from the writers' disk).
    ``pace``: the rate also gives way to the stores' commits, so durable writers stay
    within about 1.5x of their fsync latency alone (storage/pacing.py); for a backup
    taken beside a serving store.

    :raises OperationalError: the target is not empty.
    """
    if target.list(""):
        raise OperationalError(f"{target.url} is not empty: a backup goes to a new or empty "
                               "destination (it never overwrites one)")
    started = time.time_ns()
    throttle: Throttle | None = None
    if pace:
        throttle = PacedThrottle(max_bytes_per_s)
    elif max_bytes_per_s:
        throttle = Throttle(max_bytes_per_s)
    shutil.rmtree(staging_root, ignore_errors=True)  # a killed backup's leftovers
    stores: dict[str, StoreEntry] = {}
    try:
        # Every file becomes durable at once before the manifest names them
        # (ObjectStore.deferred_sync): no fsync per file beside the store's log.
        with target.deferred_sync():
            for src in sources:
                with src.shipper.snapshot(staging_root / f"{src.name}-{uuid.uuid4().hex}",
                                          fetch_remote=False) as snap:
                    if progress is not None:
                        progress.total += sum(size for _, size, _ in snap.files)
                    files = upload_snapshot(target, snap, f"data/{src.name}/", link=link,
                                            progress=progress, store_kind=src.kind,
                                            throttle=throttle, threads=BACKUP_THREADS)
                stores[src.name] = StoreEntry(src.kind, src.key_id, snap.version, snap.time_ns,
                                              snap.positions, files)
            entries = []
            for name, path in extra:
                crc, size = target.put_file(f"data/{name}", path, if_none_match=True)
                entries.append(FileEntry(name, size, crc, "file", f"data/{name}"))
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
    manifest = Manifest("backup", started, time.time_ns(), stores, entries)
    # Written last, created only if absent: a backup without it is incomplete.
    failpoint("backup_before_manifest")
    target.put(MANIFEST_KEY, manifest.encode(), if_none_match=True)
    if progress is not None:
        progress.finish()
    return manifest
