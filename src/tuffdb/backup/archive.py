"""Continuous archiving to a directory or a bucket, and point-in-time restore from it
(layout: docs/format/archive.md; design: docs/design/backup.md).

An archive is a **head** object (``tuffdb-archive.json``, advanced only with
``If-Match``), **base backups** (``bases/...json``: manifests whose files live under
``files/``), and per store **lines**: the changes a store reported after a base's
snapshot, shipped as **chunks** (``chunks/<store>/<line>/<first>-<last>``) every
``interval_s``. A line is one feed's life: versions are contiguous within it. Every
object but the head is created with ``If-None-Match: *`` and carries the writer's epoch
in its key, so no writer overwrites another's objects; the head's ``epoch`` fences: a
writer whose head update fails finds a newer epoch there and stops, saying why.

Nothing is "archived" before the head says so: chunks and files uploaded but not yet
listed in the head are ignored by restore and lag reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb._format.checksum import crc32c
from tuffdb.backup.manifest import (FileEntry, Manifest, StoreEntry, check_format, count,
                                    decode)
from tuffdb.backup.take import upload_snapshot
from tuffdb.errors import CorruptionError, Error, OperationalError
from tuffdb.log import get_logger
from tuffdb.storage.copy import file_crc
from tuffdb.storage.files import check_inside
from tuffdb.storage.objstore import (
    ObjectMissing,
    ObjectStore,
    PreconditionFailed,
    TransientError,
    object_crc,
)
from tuffdb.storage.shipping import Change, Feed, FeedLost, RemoteFile

if TYPE_CHECKING:
    from tuffdb.backup.take import Source

HEAD_KEY = "tuffdb-archive.json"
FORMAT = "tuffdb-archive"
FORMAT_VERSION = 1
CHUNK_MAGIC = b"TFDBCHK\x01"
_U32 = struct.Struct("<I")
DEFAULT_INTERVAL_S = 1.0
DEFAULT_BASE_INTERVAL_S = 3600.0
DEFAULT_RETENTION_S = 7 * 86400.0
DEFAULT_CHUNK_BYTES = 16 << 20
DEFAULT_DEGRADED_LAG_S = 30.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.05, 10.0

log = get_logger("tuffdb.archive")

ARCHIVE_LAG = metrics.REGISTRY.gauge(
    "tuffdb_archive_lag_seconds",
    "age of the oldest change not yet archived (0: everything reported is archived)")
ARCHIVE_ERRORS = metrics.REGISTRY.counter(
    "tuffdb_archive_errors_total", "object-store operations that failed and were retried")
ARCHIVE_BYTES = metrics.REGISTRY.counter(
    "tuffdb_archive_uploaded_bytes_total", "bytes uploaded to the archive")
ARCHIVE_UP = metrics.REGISTRY.gauge(
    "tuffdb_archive_up", "1 while archiving, 0 once stopped (superseded or failed)")


# -- chunks --------------------------------------------------------------------------------
def encode_chunk(store: str, line: str, changes: list[dict[str, Any]], data: list[bytes]) -> bytes:
    head = json.dumps({"store": store, "line": line, "changes": changes},
                      separators=(",", ":")).encode()
    body = b"".join([CHUNK_MAGIC, _U32.pack(len(head)), head, *data])
    return body + _U32.pack(crc32c(body))


def decode_chunk(blob: bytes, where: str) -> tuple[list[dict[str, Any]], memoryview]:
    """The changes of a chunk and its data area; CorruptionError naming ``where``."""
    if len(blob) < 16 or not blob.startswith(CHUNK_MAGIC[:7]):
        raise CorruptionError(f"{where} is not an archive chunk", path=where)
    if blob[7] > CHUNK_MAGIC[7]:
        raise CorruptionError(f"{where} has a newer chunk format ({blob[7]})", path=where)
    if _U32.unpack_from(blob, len(blob) - 4)[0] != crc32c(blob[:-4]):
        raise CorruptionError(f"{where} is damaged (checksum mismatch)", path=where)
    n = _U32.unpack_from(blob, 8)[0]
    data = memoryview(blob)[12 + n : -4]
    try:
        changes = json.loads(blob[12 : 12 + n])["changes"]
        if not isinstance(changes, list):
            raise TypeError("changes is not a list")
        total = sum(_check_change(c, where) for c in changes)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptionError(f"{where} is damaged: {exc!r}", path=where) from None
    if total != len(data) or 12 + n > len(blob) - 4:
        raise CorruptionError(f"{where} is damaged: its changes count {total} bytes of data, "
                              f"it holds {len(data)}", path=where)
    return changes, data


def _check_change(c: Any, where: str) -> int:
    """A chunk's change is well formed (the fields restore reads, of the right types, file
    names inside the store: storage.files.check_inside); returns its data bytes. A chunk
    passes its checksum whoever wrote it, so restore relies on this, not on the writer."""
    if not isinstance(c, dict):
        raise TypeError(f"a change is {type(c).__name__}, not an object")
    count(c["v"], "v")
    count(c["t"], "t")
    kind, name = c["kind"], c.get("name", "")
    if kind not in ("round", "added", "removed") or not isinstance(name, str):
        raise TypeError(f"change {c['v']} has kind {kind!r}, name {name!r}")
    if kind != "round":
        check_inside(name, where)
    if kind == "added":
        count(c["size"], "size")
        count(c["crc32c"], "crc32c")
        if not isinstance(c["object"], str):
            raise TypeError(f"change {c['v']}'s object is {c['object']!r}")
    total = 0
    for part in c.get("parts", []) if kind == "round" else ():
        if not isinstance(part, list) or len(part) != 4:
            raise TypeError(f"change {c['v']} has a part {part!r}")
        check_inside(part[0], where)
        start, end, length = (count(x, "a part's offset") for x in part[1:])
        if end - start != length:
            raise TypeError(f"change {c['v']}'s part {part!r} does not add up")
        total += length
    return total


# -- the head --------------------------------------------------------------------------------
@dataclass
class Head:
    epoch: int = 0
    writer: str = ""
    updated_ns: int = 0
    retention_s: float = DEFAULT_RETENTION_S
    bases: list[dict[str, Any]] = field(default_factory=list)
    lines: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<store>/<line>" -> info

    def encode(self) -> bytes:
        return json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION,
                           "epoch": self.epoch, "writer": self.writer,
                           "updated_ns": self.updated_ns, "retention_s": self.retention_s,
                           "bases": self.bases, "lines": self.lines},
                          indent=1, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> Head:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptionError(f"{where} is damaged: {exc}", path=where) from None
        check_format(doc, where, FORMAT, FORMAT_VERSION)
        try:
            bases, lines = doc["bases"], doc["lines"]
            if not isinstance(bases, list) or not isinstance(lines, dict):
                raise TypeError("bases must be a list and lines an object")
            head = cls(count(doc["epoch"], "epoch"), str(doc["writer"]),
                       count(doc["updated_ns"], "updated_ns"), float(doc["retention_s"]),
                       bases, lines)
            for b in head.bases:
                if not isinstance(b["object"], str):
                    raise TypeError(f"a base's object is {b['object']!r}")
                count(b["time_ns"], "a base's time_ns")
            for key, info in head.lines.items():
                store, _, line = key.partition("/")
                check_inside(store, where, single=True)
                check_inside(line, where, single=True)
                count(info["through"], f"line {key}'s through")
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptionError(f"{where} is damaged: {exc!r}", path=where) from None
        return head


def read_head(target: ObjectStore) -> tuple[Head, str] | None:
    try:
        data, etag = target.get(HEAD_KEY)
    except ObjectMissing:
        return None
    return Head.decode(data, f"{target.url}/{HEAD_KEY}"), etag


class Superseded(OperationalError):
    """Another writer took the archive over (a newer epoch); this one stopped."""


# -- the archiver ----------------------------------------------------------------------------
@dataclass
class _Line:
    store: str
    line: str  # "<epoch:08d>-<n:04d>"
    feed: Feed
    pending: list[Change] = field(default_factory=list)
    through: int = 0
    through_ns: int = 0
    # name -> the object holding that file's current content in this line
    objects: dict[str, FileEntry] = field(default_factory=dict)
    # ``objects`` as of the last head this writer stored: what is archived for sure
    committed: dict[str, FileEntry] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.store}/{self.line}"


class Archiver:
    """Ships a server's stores to ``target`` on its own thread (``tuffdb serve --archive``).

    Never on the write path: the stores only fill bounded feeds; a feed that overflows
    while the object store is down is cut off and the archiver starts a new line from
    a fresh base backup once it can. Failures are retried with exponential backoff and
    show as lag (:attr:`lag_s`, ``tuffdb_archive_lag_seconds``).
    """

    def __init__(self, target: ObjectStore, sources: list[Source], staging: Path, *,
                 interval_s: float = DEFAULT_INTERVAL_S,
                 base_interval_s: float = DEFAULT_BASE_INTERVAL_S,
                 retention_s: float = DEFAULT_RETENTION_S,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 degraded_lag_s: float = DEFAULT_DEGRADED_LAG_S,
                 feed_bytes: int = 256 << 20, local_bytes: int | None = None) -> None:
        self.target = target
        self.sources = {s.name: s for s in sources}
        self.staging = Path(staging)
        self.interval_s = interval_s
        self.base_interval_s = base_interval_s
        self.retention_s = retention_s
        self.chunk_bytes = chunk_bytes
        self.degraded_lag_s = degraded_lag_s
        self.feed_bytes = feed_bytes
        #: Tiering: keep at most this many bytes of KV cold segments locally (None: all).
        self.local_bytes = local_bytes
        self.tiered = 0  # segments this archiver tiered
        self._bad: set[str] = set()  # archived objects that failed their read-back check
        self.writer = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.epoch = 0
        self.stopped: str | None = None  # why archiving stopped
        self.last_error: str | None = None
        self.errors = 0
        self.bases_taken = 0
        self._head = Head()
        self._etag: str | None = None
        self._lines: dict[str, _Line] = {}
        self._line_no = 0
        self._last_base = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lag_from: dict[str, int] = {}  # store -> time_ns of its oldest unarchived change
        self._mu = threading.Lock()
        self._dirty = False  # the head in memory is ahead of the stored one
        #: Notified after every head commit, failed attempt and stop (tests, operators).
        self.changed = threading.Condition()
        self._pending_deletes: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Claim the archive (a new epoch) and start the thread, which takes a base first."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)
        with self._mu:
            self._lag_from = {"*": time.time_ns()}  # nothing archived yet
        ARCHIVE_UP.set(1)
        ARCHIVE_LAG.set_function(lambda: self.lag_s)
        self._thread = threading.Thread(target=self._run, name="tuffdb-archiver", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ship what is pending (bounded by ``timeout_s``), then stop and close the feeds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        for ln in self._lines.values():
            ln.feed.close()
        shutil.rmtree(self.staging, ignore_errors=True)
        ARCHIVE_UP.set(0)
        ARCHIVE_LAG.set_function(None)

    @property
    def lag_s(self) -> float:
        """Age of the oldest change not yet in the stored head: gathered and pending, or
        still queued in a feed (0: everything reported is archived)."""
        with self._mu:
            oldest = min(self._lag_from.values(), default=None)
        for ln in list(self._lines.values()):
            queued = ln.feed.oldest_ns
            if queued is not None and (oldest is None or queued < oldest):
                oldest = queued
        return 0.0 if oldest is None else max(0.0, (time.time_ns() - oldest) / 1e9)

    def status(self) -> dict[str, Any]:
        lag = self.lag_s
        state = "stopped" if self.stopped else ("degraded" if lag > self.degraded_lag_s else "ok")
        doc: dict[str, Any] = {"status": state, "target": self.target.url, "epoch": self.epoch,
                               "lag_s": round(lag, 3), "errors": self.errors,
                               "bases": self.bases_taken}
        if self.local_bytes is not None:
            doc["tiered_segments"] = self.tiered
        if self.stopped:
            doc["reason"] = self.stopped
        if self.last_error:
            doc["last_error"] = self.last_error
        return doc

    # -- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._retry(self._claim)
            self._retry(self._take_base)
            while not self._stop.wait(self.interval_s):
                self._retry(self._cycle)
            self._retry(self._cycle, deadline=time.monotonic() + 10)
        except Superseded as exc:
            self._halt(str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug: stop archiving, never the server
            log.exception("archiving failed", error=repr(exc))
            self._halt(f"archiving failed: {exc!r}")

    def _halt(self, why: str) -> None:
        self.stopped = why
        ARCHIVE_UP.set(0)
        log.error("archiving stopped", reason=why, target=self.target.url)
        for ln in self._lines.values():
            ln.feed.close()
        self._notify()

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def through(self) -> dict[str, int]:
        """Per store, the newest version the stored head says is archived."""
        return {ln.store: ln.through for ln in self._lines.values()}

    def wait_until(self, pred: Any, timeout: float) -> bool:
        """Wait (up to ``timeout``) until ``pred(self)`` holds, re-checked on every change."""
        with self.changed:
            held: bool = self.changed.wait_for(lambda: pred(self), timeout)
            return held

    def _retry(self, fn: Any, deadline: float | None = None) -> None:
        """Run ``fn`` until it succeeds, backing off on transient failures; once the
        archiver is stopping, for at most 10 more seconds."""
        delay = BACKOFF_MIN_S
        while True:
            try:
                fn()
                self.last_error = None
                return
            except (TransientError, OSError) as exc:
                self.errors += 1
                ARCHIVE_ERRORS.inc()
                self.last_error = str(exc)
                self._update_lag()
                self._notify()
                log.warning("archive operation failed; retrying", error=str(exc),
                            retry_in_s=delay)
            if self._stop.is_set() and deadline is None:
                deadline = time.monotonic() + 10
            if deadline is not None and time.monotonic() + delay > deadline:
                return
            self._stop.wait(delay) if deadline is None else time.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _cycle(self) -> None:
        lost = [ln for ln in self._lines.values() if ln.feed.lost]
        self._gather()
        if lost or time.monotonic() - self._last_base >= self.base_interval_s:
            self._take_base()
        else:
            self._ship()
        if self.local_bytes is not None and not self._dirty:
            self._tier()

    def _gather(self) -> None:
        for ln in self._lines.values():
            try:
                ln.pending += ln.feed.get(timeout=0)
            except FeedLost:
                pass  # _cycle takes a new base for it
        self._update_lag()

    def _update_lag(self) -> None:
        if not self._lines:
            return  # before the first base: lag counts from the start
        with self._mu:
            self._lag_from = {ln.store: ln.pending[0].time_ns
                              for ln in self._lines.values() if ln.pending}
            for ln in self._lines.values():
                if ln.feed.lost:
                    self._lag_from[ln.store] = min(self._lag_from.get(ln.store, time.time_ns()),
                                                   ln.through_ns or time.time_ns())
        ARCHIVE_LAG.set(self.lag_s)

    # -- head ----------------------------------------------------------------------------------
    def _claim(self) -> None:
        got = read_head(self.target)
        head, etag = got if got is not None else (Head(), None)
        head.epoch += 1
        head.writer = self.writer
        head.updated_ns = time.time_ns()
        head.retention_s = self.retention_s
        try:
            self._etag = self.target.put(HEAD_KEY, head.encode(), if_none_match=etag is None,
                                         if_match=etag)
        except PreconditionFailed:
            raise TransientError("another writer claimed the archive at the same moment; "
                                 "claiming again") from None
        self._head = head
        self.epoch = head.epoch
        log.info("archive claimed", target=self.target.url, epoch=self.epoch, writer=self.writer)

    def _commit_head(self) -> None:
        head = self._head
        head.updated_ns = time.time_ns()
        try:
            self._etag = self.target.put(HEAD_KEY, head.encode(), if_match=self._etag)
        except PreconditionFailed:
            got = read_head(self.target)
            if got is None or got[0].epoch != self.epoch or got[0].writer != self.writer:
                who = f"{got[0].writer} (epoch {got[0].epoch})" if got else "nobody (deleted)"
                raise Superseded(
                    f"archive {self.target.url} was taken over by {who}; this server "
                    f"(epoch {self.epoch}) stopped archiving") from None
            # Our own earlier write landed though its reply was lost: go on from it.
            self._etag = got[1]
            raise TransientError("the archive head changed under our own earlier write; "
                                 "writing it again") from None
        self._dirty = False
        for ln in self._lines.values():
            info = head.lines.get(ln.key)
            if info is not None:
                ln.through, ln.through_ns = info["through"], info["through_ns"]
            ln.committed = dict(ln.objects)
        self._notify()

    # -- base backups ---------------------------------------------------------------------------
    def _take_base(self) -> None:
        """Snapshot every store and upload what the archive lacks; a store whose feed was
        lost (or that has none yet) starts a new line from this snapshot."""
        started = time.time_ns()
        stores: dict[str, StoreEntry] = {}
        for gathered in self._lines.values():
            self._ship_line(gathered)  # what was gathered before the snapshot goes into its line
        for name, src in self.sources.items():
            ln = self._lines.get(name)
            if ln is None or ln.feed.lost:
                if ln is not None:
                    ln.feed.close()
                self._line_no += 1
                line = f"{self.epoch:08d}-{self._line_no:04d}"
                feed = src.shipper.subscribe(max_bytes=self.feed_bytes,
                                             pin_dir=self.staging / "pins" / name / line)
                ln = _Line(name, line, feed, objects=dict(ln.objects) if ln else {})
                self._lines[name] = ln
            with src.shipper.snapshot(self.staging / "snap" / uuid.uuid4().hex,
                                      fetch_remote=False) as snap:
                files = upload_snapshot(self.target, snap,
                                        f"files/{name}/{ln.line}/{snap.version:016d}-",
                                        known=ln.objects)
            for f in files:
                if f.kind == "file":
                    ln.objects[f.name] = f
            ARCHIVE_BYTES.inc(sum(f.size for f in files))
            stores[name] = StoreEntry(src.kind, src.key_id, snap.version, snap.time_ns,
                                      snap.positions, files, ln.line)
            # A new line starts at its snapshot; a continuing one keeps every change (an
            # older base of the line still needs those at or below this version).
            self._head.lines.setdefault(ln.key, {
                "store": name, "line": ln.line, "epoch": self.epoch, "start": snap.version,
                "through": snap.version, "through_ns": snap.time_ns, "chunks": 0})
        manifest = Manifest("base", started, time.time_ns(), stores)
        key = f"bases/{self.epoch:08d}-{manifest.finished_ns:020d}.json"
        self.target.put(key, manifest.encode(), if_none_match=True)
        self._head.bases.append({"object": key, "time_ns": manifest.time_ns,
                                 "lines": {n: s.line for n, s in stores.items()},
                                 "versions": {n: s.version for n, s in stores.items()}})
        self._dirty = True
        self._apply_retention()
        self._commit_head()
        self._delete_after_commit()
        self.bases_taken += 1
        self._last_base = time.monotonic()
        for ln in self._lines.values():
            info = self._head.lines[ln.key]
            ln.pending = [c for c in ln.pending if c.version > info["through"]]
        self._update_lag()
        log.info("base backup archived", object=key, target=self.target.url)

    # -- shipping changes -----------------------------------------------------------------------
    def _ship(self) -> None:
        for ln in self._lines.values():
            self._dirty |= self._ship_line(ln)
        if self._dirty:
            failpoint("archive_before_head")
            self._commit_head()
            for ln in self._lines.values():
                ln.pending = [c for c in ln.pending if c.version > ln.through]
            self._update_lag()

    def _ship_line(self, ln: _Line) -> bool:
        """Upload ``ln``'s pending changes (files first, then chunks); record them in the
        head object (not yet written). True when something was shipped."""
        info = self._head.lines.get(ln.key)
        if info is None:
            return False
        todo = [c for c in ln.pending if c.version > info["through"]]
        if not todo:
            return False
        i = 0
        while i < len(todo):
            changes: list[dict[str, Any]] = []
            data: list[bytes] = []
            size = 0
            while i < len(todo) and (not changes or size < self.chunk_bytes):
                c = todo[i]
                entry: dict[str, Any] = {"v": c.version, "t": c.time_ns, "kind": c.kind,
                                         "name": c.name}
                if c.kind == "round":
                    entry["parts"] = [[n, s, e, len(d)] for n, s, e, d in c.parts]
                    data += [p[3] for p in c.parts]
                    size += sum(len(p[3]) for p in c.parts)
                elif c.kind == "added":
                    f = self._upload_added(ln, c)
                    entry.update(object=f.object, size=f.size, crc32c=f.crc32c)
                else:
                    ln.objects.pop(c.name, None)
                changes.append(entry)
                i += 1
            first, last = changes[0]["v"], changes[-1]["v"]
            key = f"chunks/{ln.store}/{ln.line}/{first:016d}-{last:016d}"
            blob = encode_chunk(ln.store, ln.line, changes, data)
            with contextlib.suppress(PreconditionFailed):  # our own earlier try landed
                self.target.put(key, blob, if_none_match=True)
            ARCHIVE_BYTES.inc(len(blob))
            info["through"], info["through_ns"] = last, changes[-1]["t"]
            info["chunks"] = info.get("chunks", 0) + 1
        return True

    def _upload_added(self, ln: _Line, c: Change) -> FileEntry:
        if c.pinned is None:
            raise OperationalError(f"{c.name}: the feed pinned no copy")
        crc, size = file_crc(c.pinned)
        key = f"files/{ln.store}/{ln.line}/{c.version:016d}-{c.name}.{crc:08x}"
        with contextlib.suppress(PreconditionFailed):  # an earlier try landed
            self.target.put_file(key, c.pinned, if_none_match=True)
        ARCHIVE_BYTES.inc(size)
        f = FileEntry(c.name, size, crc, "file", key)
        ln.objects[c.name] = f
        return f

    # -- tiering ---------------------------------------------------------------------------------
    def _tier(self) -> None:
        """Past ``local_bytes`` of local KV cold segments (all tiering stores together),
        drop the oldest whose exact bytes the stored head lists, after reading each
        object back and checking its CRC-32C (kv/tier.py swaps the segment)."""
        from tuffdb.kv.tier import local_segments, tier_out  # noqa: PLC0415

        budget = self.local_bytes
        assert budget is not None
        stores = [(name, src.store) for name, src in self.sources.items()
                  if src.kind == "kv" and src.store is not None and name in self._lines]
        segs = sorted(((seg.seq, seg.id, name, store, seg) for name, store in stores
                       for seg in local_segments(store)), key=lambda t: t[:2])
        local = sum(t[4].file_size for t in segs)
        until = time.monotonic() + self.interval_s  # then ship again; tier more next cycle
        for _seq, _id, name, store, seg in segs:
            if local <= budget or time.monotonic() > until:
                return
            entry = self._lines[name].committed.get(seg.path.name)
            if entry is None or entry.size != seg.file_size or entry.object in self._bad:
                continue  # not archived yet (or its object failed the check below)
            crc = object_crc(self.target, entry.object, entry.size)
            if crc != entry.crc32c:
                self._bad.add(entry.object)
                self.last_error = (f"{self.target.url}/{entry.object} is damaged (CRC-32C "
                                   f"{crc:08x}, {entry.crc32c:08x} was uploaded): "
                                   f"{seg.path.name} stays local")
                log.error("archived object damaged", object=entry.object, store=name)
                continue
            ref = RemoteFile(self.target.url, entry.object, entry.size, entry.crc32c)
            if tier_out(store, seg.id, ref):
                local -= entry.size
                self.tiered += 1
                log.info("segment tiered", store=name, segment=seg.path.name,
                         object=entry.object)
                self._notify()

    # -- retention -------------------------------------------------------------------------------
    def _apply_retention(self) -> None:
        """Keep every base newer than the window and the newest one at or before its
        start (restore points inside the window need it), the changes those bases are
        followed by, and the files any of them reference; the rest is deleted once the
        head that no longer lists it is written (:meth:`_delete_after_commit`)."""
        head = self._head
        horizon = time.time_ns() - int(self.retention_s * 1e9)
        bases = sorted(head.bases, key=lambda b: b["time_ns"])
        older = [b for b in bases if b["time_ns"] <= horizon]
        keep = [*older[-1:], *[b for b in bases if b["time_ns"] > horizon]]
        if len(keep) == len(bases):
            return
        head.bases = keep
        # line -> the lowest version a kept base of it stands at: older changes are unneeded
        floor: dict[str, int] = {}
        for b in keep:
            for store, line in b["lines"].items():
                k = f"{store}/{line}"
                floor[k] = min(floor.get(k, b["versions"][store]), b["versions"][store])
        for ln in self._lines.values():
            floor.setdefault(ln.key, -1)  # a line without a kept base yet: keep all of it
        for k in [k for k in head.lines if k not in floor]:
            del head.lines[k]
        referenced: set[str] = set()
        for b in keep:
            m = decode(self.target.get(b["object"])[0], f"{self.target.url}/{b['object']}")
            referenced |= {f.object for st in m.stores.values() for f in st.files}
        doomed = [b["object"] for b in bases if b not in keep]
        for key, _size in self.target.list("files/") + self.target.list("chunks/"):
            parts = key.split("/")
            if len(parts) < 4 or key in referenced:
                continue
            line_key = f"{parts[1]}/{parts[2]}"
            if line_key not in floor:
                if parts[2].split("-")[0] <= f"{self.epoch:08d}":
                    doomed.append(key)  # an expired line (or a deposed writer's orphan)
                continue
            first = parts[3].split("-")
            last = int(first[1]) if parts[0] == "chunks" else int(first[0])
            if last <= floor[line_key]:
                doomed.append(key)
        self._pending_deletes = doomed

    def _delete_after_commit(self) -> None:
        if self._pending_deletes:
            self.target.delete(self._pending_deletes)
            log.info("retention deleted objects", count=len(self._pending_deletes))
            self._pending_deletes = []
