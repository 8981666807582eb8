"""The sweeper: deletes the elements of collections nothing points at any more.

DEL, an overwrite, RENAME over a collection, FLUSHDB and expiry change only a
collection's metadata (docs/format/resp.md), so its elements stay behind under an id no
metadata holds. The sweeper finds them through the owner records (one per collection:
``ff 02 id -> user key``): an id is dead when the user key's metadata is gone or holds
another id. It runs on the event loop in small slices, between commands, so it never
sees a command half done and never needs a lock:

- ids the face knows just died (DEL, overwrite, RENAME, a FLUSHDB) are queued and swept
  within a few ticks;
- a slow walk over every owner record finds the rest (collections that expired; ids
  queued before a restart), one full pass at most every ``PASS_INTERVAL_S``.

Each slice deletes at most ``SLICE_DELETES`` entries in one atomic batch, so a swept
collection of a million elements costs a few hundred short slices, not one long pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING

from tuffdb._format.resp import OWNER_PREFIX, U64
from tuffdb.server.resp.keyspace import cid_of, elements, is_collection, owner, secondary, stored

if TYPE_CHECKING:
    from tuffdb.server.resp.server import RespServer

log = logging.getLogger("tuffdb.resp")

TICK_S = 0.05  # while there is known garbage
PASS_INTERVAL_S = 30.0  # between full walks over the owner records
SLICE_DELETES = 2048
SLICE_OWNERS = 256


class Sweeper:
    __slots__ = ("_handle", "_walk_at", "_walk_from", "deleted", "pass_interval_s", "queue",
                 "srv")

    def __init__(self, srv: RespServer) -> None:
        self.srv = srv
        self.queue: deque[int] = deque()
        self._walk_from: bytes | None = OWNER_PREFIX  # None: no walk in progress
        self._walk_at = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.deleted = 0  # entries removed since start (INFO)
        self.pass_interval_s = PASS_INTERVAL_S

    def start(self) -> None:
        self._schedule(TICK_S)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def dead(self, cid: int) -> None:
        """``cid`` lost its metadata in the command that just ran."""
        self.queue.append(cid)

    def walk_soon(self) -> None:
        """Start a full walk now (after FLUSHDB)."""
        if self._walk_from is None:
            self._walk_from = OWNER_PREFIX

    def _schedule(self, delay: float) -> None:
        self._handle = asyncio.get_running_loop().call_later(delay, self._tick)

    def _tick(self) -> None:
        self._handle = None
        srv = self.srv
        try:
            if srv.script_busy():
                self._schedule(TICK_S)
                return
            node = srv.node
            if node is not None and not node.is_leader():
                # A follower's store changes only by the leader's log: the leader sweeps
                # and its deletes arrive here. A walk starts afresh once this node leads.
                self.queue.clear()
                self._walk_from = None
                self._schedule(min(1.0, self.pass_interval_s))
                return
            budget = SLICE_DELETES
            while self.queue and budget > 0:
                cid = self.queue[0]
                left, budget = self._sweep(cid, budget)
                if not left:
                    self.queue.popleft()
            if budget > 0:
                now = asyncio.get_running_loop().time()
                if self._walk_from is None and now >= self._walk_at:
                    self._walk_from = OWNER_PREFIX
                if self._walk_from is not None:
                    self._walk(budget)
                    if self._walk_from is None:
                        self._walk_at = now + self.pass_interval_s
        except Exception:  # a failed slice must not stop the sweeper; the store logs why
            log.exception("sweeper slice failed")
        if not srv.stopping:
            self._schedule(TICK_S if self.busy else min(1.0, self.pass_interval_s))

    @property
    def busy(self) -> bool:
        """Dead ids queued or a walk in progress."""
        return bool(self.queue) or self._walk_from is not None

    def _alive(self, cid: int, key: bytes) -> bool:
        raw = self.srv.store.get(stored(key))
        return is_collection(raw) and cid_of(raw) == cid

    def _sweep(self, cid: int, budget: int) -> tuple[bool, int]:
        """Delete up to ``budget`` entries of dead collection ``cid``; returns (entries
        left, budget left). A live ``cid`` (queued by mistake) is left alone."""
        store = self.srv.store
        key = store.get(owner(cid))
        if key is None:
            return False, budget
        if self._alive(cid, key):
            return False, budget
        batch = list(islice(store.scan_keys(elements(cid)), budget))
        if len(batch) < budget:
            batch += islice(store.scan_keys(secondary(cid)), budget - len(batch))
        left = len(batch) >= budget
        ops: list[tuple[bytes, None]] = [(k, None) for k in batch]
        if not left:
            ops.append((owner(cid), None))
        store.write_batch(ops, sync=False)
        self.deleted += len(batch)
        return left, budget - len(ops)

    def _walk(self, budget: int) -> None:
        store = self.srv.store
        start = self._walk_from
        assert start is not None
        seen = 0
        for okey, key in store.scan(OWNER_PREFIX, start):
            seen += 1
            cid = int(U64.unpack_from(okey, len(OWNER_PREFIX))[0])
            if not self._alive(cid, key):
                self.queue.append(cid)
            if seen >= SLICE_OWNERS or seen >= budget:
                self._walk_from = okey + b"\x00"
                return
        self._walk_from = None
