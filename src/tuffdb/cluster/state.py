"""A node's replication state on disk: ``<data_dir>/cluster/state.json``.

``lsn`` is the last round this node holds durably (applied and fsynced as a follower,
committed as a leader); ``epoch`` the newest leader epoch it has seen; ``history`` the
epochs of its rounds as ``[[epoch, first_lsn], ...]`` (Kafka's leader-epoch file): the
rounds from ``first_lsn`` up to the next entry's were written by that epoch's leader.
Two nodes share every round up to the point where their histories part, so a node that
rejoins keeps what it shares with the leader and gives up the rest.

Written whole to a temporary file, fsynced and renamed (and the directory fsynced), so a
crash leaves the old or the new state, never a mix; every save counts one more ``gen``.
``lsn`` there may lag what the stores hold (it is written every half second or so, not
with every round). What a follower acknowledged never lags: before each ACK it writes the
LSN it acknowledges to ``<data_dir>/cluster/acked`` (:class:`AckedFile`: two checksummed
slots in a fixed file, one synchronous write), and :func:`load` takes it when it was
written under the saved ``gen``. A node's LSN is therefore never below a round it
acknowledged, which is what "the furthest ahead wins" needs: a write was acknowledged
once followers had acknowledged it. The stores may still hold rounds past that LSN
(applied, not yet acknowledged), so the file also says whose rounds those may be:
``open_epoch`` is the epoch of the leader whose history the stores may hold past ``lsn``
(this node's own epoch while it leads, its leader's while it follows), 0 when ``lsn`` is
all they hold (a follower stopped cleanly, a snapshot installed). A node that starts with
``open_epoch`` set is *unsure*: replaying that leader's rounds over what it holds changes
nothing, but any other leader's history may lack them, so it takes a snapshot from any
other leader (docs/design/replication.md, "Positions").
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb._format.checksum import crc32c
from tuffdb._format.cluster import (ACKED_FILE_SIZE, ACKED_SLOT, ACKED_SLOT_SPAN,
                                     CRC_OFFSET)
from tuffdb.errors import CorruptionError
from tuffdb.storage.files import fsync_dir, fsync_fd, write_file_durably

STATE_FILE = "state.json"
ACKED_FILE = "acked"


@dataclass
class NodeState:
    lsn: int = 0
    epoch: int = 0
    history: list[list[int]] = field(default_factory=list)
    # the leader epoch whose rounds the stores may hold past ``lsn`` (saved; 0: none)
    open_epoch: int = 0
    # ``open_epoch`` as loaded at start: rounds past ``lsn`` may be held and were never
    # counted (the last run did not save its position). Not saved; 0 once a leader of
    # that epoch streams to this node, or a snapshot replaces its stores.
    unsure: int = 0
    gen: int = 0  # how many times the state was saved (the acked file names the one it follows)

    def begin_epoch(self, epoch: int, first_lsn: int) -> None:
        """This node leads (or follows a leader of) ``epoch`` from round ``first_lsn``."""
        self.epoch = max(self.epoch, epoch)
        self.history = [h for h in self.history if h[1] < first_lsn]
        if not self.history or self.history[-1][0] != epoch:
            self.history.append([epoch, first_lsn])


def epoch_at(history: list[list[int]], lsn: int) -> int:
    """The epoch that wrote round ``lsn`` according to ``history`` (0 before any)."""
    found = 0
    for epoch, first in history:
        if first <= lsn:
            found = epoch
    return found


def shared_prefix(ours: list[list[int]], our_lsn: int, theirs: list[list[int]],
                  their_lsn: int) -> int:
    """The last LSN two nodes both hold as written by the same leaders (so the same
    rounds: one leader per epoch writes one sequence). Both histories are step
    functions of the LSN; they can first differ only where one of them steps."""
    end = min(our_lsn, their_lsn)
    steps = sorted({first for _, first in ours} | {first for _, first in theirs})
    for first in steps:
        if first > end:
            break
        if epoch_at(ours, first) != epoch_at(theirs, first):
            return first - 1
    return end


def load(directory: Path) -> NodeState:
    path = directory / STATE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return NodeState()
    try:
        doc = json.loads(raw)
        state = NodeState(int(doc["lsn"]), int(doc["epoch"]),
                          [[int(e), int(f)] for e, f in doc["history"]],
                          int(doc.get("open_epoch", 0)), gen=int(doc.get("gen", 0)))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptionError(f"cluster state is unreadable: {exc}", path=str(path)) from None
    acked = read_acked(directory)
    if acked is not None and acked[0] == state.gen:
        state.lsn = max(state.lsn, acked[1])
    state.unsure = state.open_epoch
    return state


def save(directory: Path, state: NodeState) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    state.gen += 1
    data = json.dumps({"lsn": state.lsn, "epoch": state.epoch, "history": state.history,
                       "open_epoch": state.open_epoch, "gen": state.gen})
    write_file_durably(directory / STATE_FILE, data.encode())


def _newest_slot(raw: bytes) -> tuple[int, int, int, int] | None:
    """(sequence, slot index, gen, lsn) of the newest whole slot in the acked file's
    bytes; None when neither is (empty, or torn)."""
    whole = []
    for index in (0, 1):
        at = index * ACKED_SLOT_SPAN
        if len(raw) < at + ACKED_SLOT.size:
            continue
        seq, gen, lsn, crc = ACKED_SLOT.unpack_from(raw, at)
        if seq and crc32c(raw[at : at + CRC_OFFSET]) == crc:
            whole.append((seq, index, gen, lsn))
    return max(whole, default=None)


def read_acked(directory: Path) -> tuple[int, int] | None:
    """(gen, lsn) of the newest whole slot of the acked file; None without one."""
    try:
        newest = _newest_slot((directory / ACKED_FILE).read_bytes())
    except FileNotFoundError:
        return None
    return None if newest is None else (newest[2], newest[3])


class AckedFile:
    """The LSN a follower acknowledges, durable before the ACK goes out, in a file whose
    size never changes after it is made: one direct, synchronous write of the slot
    (``O_DIRECT | O_DSYNC``: a FUA write where the disk has one, no cache flush of
    anything else; its p99 here was a third of a pwrite + fdatasync's), or where the
    file system refuses direct I/O a pwrite and an fdatasync."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / ACKED_FILE
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._fd).st_size != ACKED_FILE_SIZE:  # new (or cut short by a crash)
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, bytes(ACKED_FILE_SIZE), 0)
            fsync_fd(self._fd)
            fsync_dir(directory)
        newest = _newest_slot(os.pread(self._fd, ACKED_FILE_SIZE, 0))
        self._seq, self._next = (0, 0) if newest is None else (newest[0], 1 - newest[1])
        self._buf = mmap.mmap(-1, ACKED_SLOT_SPAN)  # page-aligned, as direct I/O needs
        self._direct = -1
        with contextlib.suppress(OSError, AttributeError):
            self._direct = os.open(path, os.O_WRONLY | os.O_DIRECT | os.O_DSYNC)

    def write(self, gen: int, lsn: int) -> None:
        self._seq += 1
        body = ACKED_SLOT.pack(self._seq, gen, lsn, 0)[:CRC_OFFSET]
        slot = body + crc32c(body).to_bytes(4, "little")
        at = self._next * ACKED_SLOT_SPAN
        if self._direct >= 0:
            self._buf[: len(slot)] = slot
            failpoint("before_fsync")
            try:
                os.pwrite(self._direct, self._buf, at)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                os.close(self._direct)  # refused (alignment): write through the cache
                self._direct = -1
            else:
                metrics.FSYNCS.inc()
                self._next = 1 - self._next
                return
        os.pwrite(self._fd, slot, at)
        fsync_fd(self._fd, data_only=True)
        self._next = 1 - self._next

    def close(self) -> None:
        if self._direct >= 0:
            os.close(self._direct)
            self._direct = -1
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._buf.close()
