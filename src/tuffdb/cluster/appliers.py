"""How a follower applies a leader's round to each of its stores.

Every store applies through its own code (the same path its own writes or its recovery
take), never by copying files: the KV store and the documents' KV store take the frames'
records through the put path (``KVStore.replica_apply``, ``Database.replica_apply``: the
documents' indexes, search and watchers follow), the event store appends the frames at the
same address and indexes them as recovery does (``EventStore.replica_apply``). ``apply``
may leave the round in memory and the store's log; ``flush`` makes every round applied so
far durable (one fsync per store for a run of rounds: the follower's group commit).
"""

from __future__ import annotations

from typing import Any, Protocol

from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import CorruptionError

Part = tuple[str, int, bytes]


class Applier(Protocol):
    def apply(self, parts: list[Part]) -> None: ...
    def flush(self) -> None: ...


class KVApplier:
    """A ``KVStore`` (the RESP face's), or a ``Database`` (the documents face's)."""

    def __init__(self, target: Any, kv: Any) -> None:
        self.target = target  # has replica_apply(frames) -> ticket
        self.kv = kv
        self.ticket = 0

    def apply(self, parts: list[Part]) -> None:
        frames = parts[0][2] if len(parts) == 1 else b"".join(p[2] for p in parts)
        self.ticket = self.target.replica_apply(frames)

    def flush(self) -> None:
        if self.ticket:
            self.kv.wait_durable(self.ticket)
            self.ticket = 0


class EventsApplier:
    """Rounds are held until :meth:`flush`, then appended in runs: the rounds of a run that
    continue one another in one segment go in one ``replica_apply`` (one write, one fsync),
    as a leader's drain would."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.pending: list[tuple[int, int, bytes]] = []  # (segment base, address, frames)

    def apply(self, parts: list[Part]) -> None:
        for name, offset, data in parts:
            stem = name.rsplit("/", 1)[-1].split(".", 1)[0]
            if not stem.isdigit():
                raise CorruptionError(f"replicated event frames for an unknown file {name!r}")
            base = int(stem)
            self.pending.append((base, base + offset - SEGMENT_HEADER_SIZE, data))

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        run: list[bytes] = []
        run_base = run_start = run_end = -1
        for base, address, data in pending:
            if run and base == run_base and address == run_end:
                run.append(data)
                run_end += len(data)
                continue
            self._append(run_base, run_start, run)
            run, run_base, run_start, run_end = [data], base, address, address + len(data)
        self._append(run_base, run_start, run)

    def _append(self, base: int, address: int, run: list[bytes]) -> None:
        if not run:
            return
        data = run[0] if len(run) == 1 else b"".join(run)
        log = self.store._log  # noqa: SLF001 - the store's own log
        tail = log.tail_address
        if address < tail:  # some already here (a snapshot, or a replay after a restart)
            # An address says where bytes are, not that they are the leader's: a node that
            # wrote events of its own while it led holds other bytes there. Those are a
            # divergence (the node then asks for a snapshot: follower.py), never skipped.
            held = min(len(data), tail - address)
            if log.read_at(base, address, held) != data[:held]:
                raise CorruptionError(f"replicated event frames at {address} differ from the "
                                      "bytes this log holds there: the logs have diverged")
            if address + len(data) <= tail:
                return
            # The log here is a prefix of the same bytes, cut at a committed frame end.
            data, address = data[tail - address:], tail
        self.store.replica_apply(base, address, data)
