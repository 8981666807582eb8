"""The log-shipping seam: one path out of a store directory for backup, continuous
archiving and replication (design and contract: docs/design/shipping.md).

A store owns one :class:`Shipper` for its directory and reports to it, after each change
is durable:

* ``round(parts)``: one durable commit round; ``parts = [(name, start, end, data)]``, the
  byte range of each log it appended to and the exact bytes written there. ``name`` is
  relative to the store directory; offsets are **file** offsets (the segment header
  counts), and the first round of a log starts at 0 with the header's bytes, so a
  consumer can rebuild every log from its rounds alone.
* ``added(name)``: an immutable file became durable under its final name (also a log
  segment that was sealed: from then on it is a file, complete at its last round's end).
* ``removed(name)``: a file was deleted.

The hot path pays for this only while somebody listens: a store builds a round's parts
only when :attr:`Shipper.feeds` is non-empty (one truthiness check per round).
Everything a consumer needs without listening (a consistent copy, the committed ends of
the logs) comes from the store on demand through its :class:`Source`: ``pause()``
holds off commit rounds and file deletions (a bounded pause, one hard link per file),
``state()`` lists the files and logs as they are at that instant.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tuffdb.errors import CorruptionError, OperationalError
from tuffdb.storage.copy import copy_to_path
from tuffdb.storage.files import check_inside
from tuffdb.storage.objstore import shared_target

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

Part = tuple[str, int, int, bytes]

#: A feed that holds more than this many changes, or bytes of round data, is cut off.
DEFAULT_FEED_CHANGES = 100_000
DEFAULT_FEED_BYTES = 256 << 20


class Source(Protocol):
    """What a store offers its shipper (implemented next to each store)."""

    def pause(self) -> AbstractContextManager[None]:
        """While held: no commit round runs and no file of the store is deleted or
        renamed away. A logged store first makes every write so far durable."""
        ...

    def state(self) -> tuple[list[str], dict[str, int]]:
        """Inside :meth:`pause`: the immutable files, and each live log's committed end."""
        ...

    def remote(self) -> dict[str, RemoteFile]:
        """Inside :meth:`pause`: immutable files of the state held in an archive instead
        of the store directory (tiered KV segments), by name."""
        ...


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """An immutable file whose bytes are object ``object`` of the archive at ``url``."""

    url: str
    object: str
    size: int
    crc32c: int

    def fetch(self, dst: Path) -> None:
        """Download it into a new file ``dst`` and verify it.

        :raises CorruptionError: the object differs from what the store recorded.
        :raises NotFoundError: the object is gone.
        """
        crc, size = shared_target(self.url).get_file(self.object, dst)
        if (crc, size) != (self.crc32c, self.size):
            raise CorruptionError(
                f"{self.url}/{self.object} is damaged: {size} bytes with CRC-32C {crc:08x}, "
                f"{self.size} bytes with {self.crc32c:08x} expected",
                path=f"{self.url}/{self.object}")


class FeedLost(OperationalError):
    """A feed fell behind its bound and was cut off: start again from a snapshot."""


@dataclass(frozen=True, slots=True)
class Change:
    """One reported change. ``kind`` is ``"round"``, ``"added"`` or ``"removed"``."""

    version: int
    time_ns: int
    kind: str
    parts: tuple[Part, ...] = ()
    name: str = ""
    #: For ``added`` on a feed that pins files: a hard link to the file as it was added,
    #: which stays valid after the store deletes the file (the consumer unlinks it).
    pinned: Path | None = None


@dataclass
class Snapshot:
    """A consistent copy of a store's state (see :meth:`Shipper.snapshot`)."""

    staging: Path
    files: list[tuple[str, int, str]]  # (name, size, "file" | "log" | "remote")
    positions: dict[str, int]
    wall_time: float
    time_ns: int
    version: int
    #: Files held in an archive (kind "remote" in ``files``): not in ``staging``.
    remote: dict[str, RemoteFile] = field(default_factory=dict)
    _released: bool = field(default=False, repr=False)

    def path(self, name: str) -> Path:
        return self.staging / name

    def release(self) -> None:
        """Remove the staging directory (the links, not the store's files)."""
        if not self._released:
            self._released = True
            shutil.rmtree(self.staging, ignore_errors=True)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Feed:
    """Changes reported after :meth:`Shipper.subscribe`, in order, bounded."""

    def __init__(self, shipper: Shipper, max_changes: int, max_bytes: int,
                 pin_dir: Path | None) -> None:
        self._shipper = shipper
        self._max_changes = max_changes
        self._max_bytes = max_bytes
        self.pin_dir = pin_dir
        self._queue: deque[Change] = deque()
        self._bytes = 0
        self._cv = threading.Condition(threading.Lock())
        self.lost = False
        self.closed = False
        #: Version of the newest change dispatched before this feed existed.
        self.start_version = 0

    def _put(self, change: Change, nbytes: int) -> bool:
        """Queue ``change`` (the shipper's lock is held); False when this cut it off."""
        with self._cv:
            if len(self._queue) >= self._max_changes or self._bytes + nbytes > self._max_bytes:
                self.lost = True
                for c in self._queue:
                    _unpin(c)
                self._queue.clear()
                self._bytes = 0
                self._cv.notify_all()
                return False
            self._queue.append(change)
            self._bytes += nbytes
            self._cv.notify_all()
            return True

    def get(self, timeout: float | None = None, *, limit: int = 1 << 30) -> list[Change]:
        """Up to ``limit`` queued changes (waiting up to ``timeout`` for the first);
        [] on timeout or once closed.

        :raises FeedLost: the feed fell behind and was cut off.
        """
        with self._cv:
            if not self._queue and not self.lost and not self.closed:
                self._cv.wait_for(lambda: self._queue or self.lost or self.closed, timeout)
            if self.lost:
                raise FeedLost("the shipping feed fell behind its bound and was cut off; "
                               "take a new snapshot and subscribe again")
            out: list[Change] = []
            while self._queue and len(out) < limit:
                c = self._queue.popleft()
                self._bytes -= sum(len(p[3]) for p in c.parts)
                out.append(c)
            return out

    @property
    def pending(self) -> int:
        """Changes queued and not yet taken."""
        return len(self._queue)

    @property
    def oldest_ns(self) -> int | None:
        """``time_ns`` of the oldest change queued and not yet taken (None: none)."""
        with self._cv:
            return self._queue[0].time_ns if self._queue else None

    def close(self) -> None:
        """Stop receiving; queued pinned files are unlinked."""
        self._shipper._unsubscribe(self)
        with self._cv:
            self.closed = True
            for c in self._queue:
                _unpin(c)
            self._queue.clear()
            self._cv.notify_all()
        if self.pin_dir is not None:
            shutil.rmtree(self.pin_dir, ignore_errors=True)

    def __enter__(self) -> Feed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unpin(change: Change) -> None:
    if change.pinned is not None:
        with contextlib.suppress(FileNotFoundError):
            change.pinned.unlink()


def link_or_copy(src: Path, dst: Path, size: int | None = None) -> None:
    """Hard-link ``src`` to ``dst``; copy (the first ``size`` bytes) across file systems."""
    try:
        os.link(src, dst)
        return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
    copy_to_path(src, dst, size)


def new_bytes(have: int, start: int, end: int, data: bytes) -> bytes:
    """The part of a round's ``data`` (for ``[start, end)``) past ``have`` bytes a consumer
    already holds of that log: b"" when it has them all.

    :raises FeedLost: the round starts after ``have`` (a gap: bytes were missed).
    """
    if end <= have:
        return b""
    if start > have:
        raise FeedLost(f"a round starts at {start} but only {have} bytes are held: a gap")
    return data[have - start :]


class Shipper:
    """The store side reports here; consumers snapshot, subscribe and read."""

    def __init__(self, directory: Path, source: Source) -> None:
        self.directory = Path(directory)
        self._source = source
        self._mu = threading.Lock()
        self._cv = threading.Condition(self._mu)
        self._version = 0
        #: The subscribed feeds; a store builds round parts only while this is non-empty.
        self.feeds: list[Feed] = []

    # -- store side ----------------------------------------------------------------------
    def round(self, parts: list[Part]) -> None:
        """One durable commit round (see the module docstring)."""
        if parts:
            self._dispatch("round", tuple(parts), "", sum(len(p[3]) for p in parts))

    def added(self, name: str) -> None:
        """Immutable file ``name`` became durable under its final name."""
        if self.feeds:
            self._dispatch("added", (), name, 0)

    def removed(self, name: str) -> None:
        """File ``name`` was deleted."""
        if self.feeds:
            self._dispatch("removed", (), name, 0)

    def _dispatch(self, kind: str, parts: tuple[Part, ...], name: str, nbytes: int) -> None:
        with self._mu:
            feeds = self.feeds
            if not feeds:
                return
            self._version += 1
            version, now = self._version, time.time_ns()
            for feed in list(feeds):
                pinned = None
                if kind == "added" and feed.pin_dir is not None:
                    pinned = feed.pin_dir / f"{version:020d}-{name.replace('/', '%')}"
                    link_or_copy(self.directory / name, pinned)
                change = Change(version, now, kind, parts, name, pinned)
                if not feed._put(change, nbytes):
                    _unpin(change)
                    feeds.remove(feed)
            self._cv.notify_all()

    # -- consumer side -------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._version

    def positions(self) -> dict[str, int]:
        """Committed end offset of every live log (name -> offset)."""
        with self._source.pause():
            return self._source.state()[1]

    def snapshot(self, staging: Path, *, fetch_remote: bool = True) -> Snapshot:
        """A consistent copy of the store's state, taken between commit rounds: every
        immutable file and every live log hard-linked into ``staging`` (a new directory
        on the same file system; copied otherwise), with each log's committed size.
        A log's link may grow past its position later: read only ``positions[name]``
        bytes of it. Files the store keeps in an archive (tiered) are downloaded into
        ``staging`` after the pause, or with ``fetch_remote=False`` listed with kind
        ``"remote"`` and described in ``Snapshot.remote``. Release it (or use it as a
        context manager) when done.
        """
        staging = Path(staging)
        staging.mkdir(parents=True)
        files: list[tuple[str, int, str]] = []
        try:
            with self._source.pause():
                names, logs = self._source.state()
                remote = self._source.remote()
                with self._mu:
                    version = self._version
                now = time.time_ns()
                made: set[Path] = set()
                for name in names:
                    dst = staging / name
                    if dst.parent not in made:
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        made.add(dst.parent)
                    link_or_copy(self.directory / name, dst)
                    files.append((name, dst.stat().st_size, "file"))
                for name, size in logs.items():
                    dst = staging / name
                    if dst.parent not in made:
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        made.add(dst.parent)
                    link_or_copy(self.directory / name, dst, size)
                    files.append((name, size, "log"))
            # Outside the pause: an archived file never changes, and a download can be slow.
            for name, ref in sorted(remote.items()):
                if fetch_remote:
                    (staging / name).parent.mkdir(parents=True, exist_ok=True)
                    ref.fetch(staging / name)
                    files.append((name, ref.size, "file"))
                else:
                    files.append((name, ref.size, "remote"))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Snapshot(staging, files, dict(logs), now / 1e9, now, version,
                        {} if fetch_remote else dict(remote))

    def subscribe(self, *, maxsize: int = DEFAULT_FEED_CHANGES,
                  max_bytes: int = DEFAULT_FEED_BYTES, pin_dir: Path | None = None) -> Feed:
        """Every change reported after this call, in order, each with a ``version``
        (strictly increasing per shipper) and ``time_ns``. A feed past ``maxsize``
        changes or ``max_bytes`` of round data is cut off (:class:`FeedLost` from its
        ``get``). With ``pin_dir`` (same file system as the store), every added file is
        hard-linked there as it is reported (``Change.pinned``).
        """
        if pin_dir is not None:
            pin_dir = Path(pin_dir)
            pin_dir.mkdir(parents=True, exist_ok=True)
        feed = Feed(self, maxsize, max_bytes, pin_dir)
        with self._mu:
            feed.start_version = self._version
            self.feeds = [*self.feeds, feed]  # a new list: stores read it without the lock
        return feed

    def _unsubscribe(self, feed: Feed) -> None:
        with self._mu:
            if feed in self.feeds:
                self.feeds = [f for f in self.feeds if f is not feed]

    def read(self, name: str, start: int, end: int) -> bytes:
        """Committed bytes ``[start, end)`` of a log or file.

        :raises FileNotFoundError: it is gone (spilled, merged away): take a snapshot.
        """
        fd = os.open(self.directory / name, os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, start)
            while len(data) < end - start:
                more = os.pread(fd, end - start - len(data), start + len(data))
                if not more:
                    raise CorruptionError(f"{name} ends before {end}",
                                          path=str(self.directory / name), offset=start + len(data))
                data += more
            return data
        finally:
            os.close(fd)

    def wait(self, version: int, timeout: float | None = None) -> int:
        """Block until a version > ``version`` exists (or ``timeout``); return the newest."""
        with self._cv:
            self._cv.wait_for(lambda: self._version > version, timeout)
            return self._version

    @contextlib.contextmanager
    def paused(self) -> Iterator[tuple[list[str], dict[str, int]]]:
        """Hold the store between rounds (what :meth:`snapshot` does) and yield its state:
        the immutable files and each live log's committed end, for a consumer that must
        read several things at one instant."""
        with self._source.pause():
            yield self._source.state()


def copy_prefix(src: Path, dst: Path, size: int) -> None:
    """Copy the first ``size`` bytes of ``src`` to a new file ``dst`` (never a link: a
    log's copy must not share its inode, it is appended to or cut)."""
    copy_to_path(src, dst, size)


class Mirror:
    """A directory kept equal to a store's state from a :class:`Snapshot` and then the
    :class:`Change` s of a feed: immutable files linked or copied, logs copied up to
    their shipped ends. What a follower's catch-up or a test of the seam needs.
    Not fsynced: a consumer that needs durability fsyncs what it keeps.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.held: dict[str, int] = {}  # log name -> bytes held
        self.version = 0

    def _target(self, name: str) -> Path:
        """Where file ``name`` of the store goes (CorruptionError when the name would
        leave the directory: a feed may come from an archive someone else can change)."""
        path = self.directory / check_inside(name, f"a change for {self.directory}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def load(self, snap: Snapshot) -> None:
        for name, size, kind in snap.files:
            dst = self._target(name)
            if kind == "log":
                copy_prefix(snap.path(name), dst, size)
                self.held[name] = size
            else:
                link_or_copy(snap.path(name), dst)
        self.version = snap.version

    def apply(self, change: Change) -> None:
        """Apply one change (changes at or below the loaded version are skipped).

        :raises FeedLost: a round leaves a gap in a log.
        """
        if change.version <= self.version:
            return
        self.version = change.version
        if change.kind == "round":
            for name, start, end, data in change.parts:
                more = new_bytes(self.held.get(name, 0), start, end, data)
                if more:
                    with self._target(name).open("ab") as f:
                        f.write(more)
                    self.held[name] = end
        elif change.kind == "added":
            if change.pinned is None:
                raise OperationalError(f"{change.name} was added but the feed pins no files")
            dst = self._target(change.name)
            tmp = dst.with_name(dst.name + ".mirror")
            link_or_copy(change.pinned, tmp)
            tmp.replace(dst)
            self.held.pop(change.name, None)
        else:
            with contextlib.suppress(FileNotFoundError):
                self._target(change.name).unlink()
            self.held.pop(change.name, None)
