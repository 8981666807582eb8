"""Group commit for an event loop: the durable writes of one loop pass share one round.

Like Redis's fsync in ``beforeSleep``: the first waiter of a pass schedules the round
with ``call_soon``, so it runs once the pass's I/O callbacks (every request that arrived
together) are done. The round then waits ``EXTRA_PASSES`` more loop passes (each a
``call_soon`` hop: the loop polls its sockets between hops, so requests already on the
wire join this round instead of paying for the next fsync). The loop thread then writes
and fsyncs the round itself (:meth:`KVStore.wait_durable`: the group-commit leader path,
no committer thread to wake and no GIL hand-off back) and calls every waiter in order.
A/B on the compiled build, redis-benchmark -P 1 SET under ``always``, 4 reps each: 0
extra passes 26.0k/s, 2 passes 31.8k/s (every rep), one pass or "hop while the round
grew" in between.

Handing only the fsync to a thread, so the loop could serve other clients meanwhile,
measured slower on this 2-core machine for RESP ``always`` SET (redis-benchmark -P 1, all
writes): the thread wake-ups and GIL hand-offs cost more CPU per round than the fsync
wait they hide. The ekoDB HTTP face's mixed loads measured the same way round once the
round waited for the extra passes (YCSB A/8 and F/8; ``App.durable`` has the figures):
the committer thread's wake-ups queue behind the busy loop on the server's one core.

With ``aio=True`` (the ekoDB face) the loop still writes the round itself but hands its
fsync to the kernel (Linux AIO, storage/aio_sync.py) and serves on; the eventfd that
reports completion is one more reader on the loop, so no thread and no GIL hand-off is
involved. One round's fsync is in flight at a time; the next gathers meanwhile.

With ``threaded=True`` (a cluster leader: a round is acknowledged only once followers
confirmed it, a network round trip the loop must not wait for) each round is handed to
the store's committer thread (``when_durable``) and its waiters are called back on the
loop when it completes; several rounds may be in flight, completing in order. A round
whose confirmation failed leaves its writes in the store, unconfirmed: until a later
round is confirmed (which covers every earlier one), readers are held for one
(:attr:`unconfirmed`), so no reply shows a write a failover could still lose. A round's
ticket is taken when it ends, after its writes; a writer takes one with :meth:`opening`
before its writes and passes it as ``since`` when it joins the round, and the earliest
of them goes with the round (``KVStore.when_durable(ticket, since)``): if the node
stepped down meanwhile, the round that carried them was refused even when a later one,
settled locally after the step-down, is the one the round's ticket names.

Readers: a reply must not show a write a crash could still lose (PostgreSQL makes a commit
visible only after its WAL flush; Redis sends every reply of a pass after the pass's
fsync). :meth:`after_writes_seen` holds a reader's reply while any write waits for its
round; with :meth:`mark` the writer names the keys it wrote, and :meth:`keys_round`
holds a reader of those keys only while one's last write waits, for the round that write
joined (the one in flight or the one gathering).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol, cast

from tuffdb.storage.aio_sync import AioSync, open_aio
from tuffdb.storage.files import fsync_fd
from tuffdb.storage.pacing import SYNCS

Waiter = Callable[[BaseException | None], None]


class DurableStore(Protocol):
    def write_ticket(self) -> int: ...
    def wait_durable(self, ticket: int) -> None: ...


class SplitRounds(Protocol):  # a store whose round's fsync the caller may do (KVStore)
    def begin_round(self, settle: Callable[[], None]) -> tuple[int, Any] | None: ...
    def end_round(self, number: int, staged: Any, error: BaseException | None) -> None: ...


EXTRA_PASSES = 2  # loop passes a round waits for more requests before its fsync


class LoopRounds:
    """``aio``: fsync each round through Linux AIO (storage/aio_sync.py) and keep serving
    while it runs; the next round gathers meanwhile and starts when it completes (one
    fsync in flight, as PostgreSQL's WAL flush). Where AIO is missing, or the store
    cannot split a round, the loop fsyncs inline as above."""

    def __init__(self, store: DurableStore, *, aio: bool = False, threaded: bool = False) -> None:
        self.store = store
        self.threaded = threaded
        self._flying: dict[int, list[Waiter]] = {}  # threaded rounds in flight, by their _gen
        self.unconfirmed = False  # a round's confirmation failed and none succeeded since
        self._round: list[Waiter] = []
        self._passes = 0
        self._aio: AioSync | None = None
        self._want_aio = aio and hasattr(store, "begin_round")
        # the round being fsynced: (its waiters, round number, staged writes, fsync ids,
        # the keys marked in it)
        self._inflight: tuple[list[Waiter], int, Any, set[int], list[Hashable]] | None = None
        self._submitted = 0.0  # when the round in flight was handed to AIO
        self._ready = False  # the next round's passes are done; it starts on completion
        self._keys: list[Hashable] = []  # marked in the gathering round
        self._gen = 0  # counts rounds taken from gathering: names the gathering round
        self._dirty: dict[Hashable, int] = {}  # marked key -> _gen of the round it joined
        self._since = 0  # threaded: the earliest ``since`` of the gathering's writers (0: none)

    def opening(self) -> int:
        """A writer's ``since`` for :meth:`after_round` / :meth:`future`: a ticket taken
        before its writes (threaded, a cluster node; 0 otherwise)."""
        if not self.threaded:
            return 0
        try:
            return self.store.write_ticket()
        except Exception:  # noqa: BLE001  (closed or poisoned: the round will say so)
            return 0

    def after_round(self, fn: Waiter, since: int = 0) -> None:
        """Call ``fn(error)`` once every write made so far is durable. ``error`` is the
        failure that poisoned the store, if any: then nothing in the round is durable.
        ``since``: see :meth:`opening`."""
        if since and (not self._since or since < self._since):
            self._since = since
        if not self._round:
            self._passes = 0
            asyncio.get_running_loop().call_soon(self._hop)
        self._round.append(fn)

    def mark(self, keys: Iterable[Hashable]) -> None:
        """Name the keys just written (a round is due for them: one is scheduled if none
        gathers yet, so a marked key never waits for a round that does not come)."""
        if not self._round:
            self.after_round(_nothing)
        gen, dirty, mine = self._gen, self._dirty, self._keys
        for k in keys:
            dirty[k] = gen
            mine.append(k)

    @property
    def holds_readers(self) -> bool:
        """Some write is not yet durable (a round gathers or is in flight), or not yet
        confirmed by followers (:attr:`unconfirmed`)."""
        return (bool(self._round) or self._inflight is not None or bool(self._flying)
                or self.unconfirmed)

    def keys_round(self, keys: Iterable[Hashable]) -> list[Waiter] | None:
        """For a reader of ``keys`` alone: the waiter list of the latest round that one of
        their marked writes joined, to append the reader's waiter to; None when none of
        them waits (so the caller builds no waiter)."""
        dirty = self._dirty
        if not dirty:
            return None
        gens = [g for g in map(dirty.get, keys) if g is not None]
        if not gens:
            return None
        latest = max(gens)
        if latest == self._gen:
            return self._round
        flying = self._flying.get(latest)
        if flying is not None:
            return flying
        assert self._inflight is not None  # a marked key leaves _dirty when its round ends
        return self._inflight[0]

    def _take(self) -> tuple[list[Waiter], list[Hashable]]:
        """The gathering round's waiters and keys; the next round gathers from here."""
        waiters, self._round = self._round, []
        keys, self._keys = self._keys, []
        self._gen += 1
        return waiters, keys

    def _release(self, keys: list[Hashable]) -> None:
        """A round ended: its keys are durable now (unless a later round wrote them)."""
        dirty, gen = self._dirty, self._gen
        for k in keys:
            if dirty.get(k, gen) != gen:
                del dirty[k]

    def _hop(self) -> None:
        if self._passes < EXTRA_PASSES:
            self._passes += 1
            asyncio.get_running_loop().call_soon(self._hop)
            return
        self._finish()

    @property
    def syncing(self) -> bool:
        """A round's fsync is in flight (AIO): the kernel worker running it needs CPU."""
        return self._inflight is not None

    def after_writes_seen(self, fn: Waiter) -> bool:
        """For a reader: join this pass's round if writes are waiting for it, so no reply
        shows a write a crash could still lose. False when everything written is already
        durable (every write joins a round, which stays pending until its fsync)."""
        waiters = self.writes_round()
        if waiters is None:
            return False
        waiters.append(fn)
        return True

    def writes_round(self) -> list[Waiter] | None:
        """The waiter list :meth:`after_writes_seen` joins (None: nothing to wait for)."""
        if self.unconfirmed and not self._round:
            self.after_round(_nothing)  # a round to confirm what the failed one left
        if self._round:
            return self._round
        if self._inflight is not None:
            return self._inflight[0]
        if self._flying:
            return self._flying[max(self._flying)]
        return None

    def future(self, since: int = 0) -> asyncio.Future[None]:
        """:meth:`after_round` as a future (to await, or to gather with others)."""
        fut = self._future(lambda fn: self.after_round(fn, since))
        assert fut is not None
        return fut

    def seen_future(self) -> asyncio.Future[None] | None:
        """:meth:`after_writes_seen` as a future; None when no write waits."""
        return self._future(self.after_writes_seen)

    @staticmethod
    def _future(join: Callable[[Waiter], bool | None]) -> asyncio.Future[None] | None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(exc: BaseException | None) -> None:
            if fut.done():  # cancelled meanwhile
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        return None if join(done) is False else fut

    def _finish(self) -> None:
        if self.threaded:
            self._run_threaded()
            return
        if self._inflight is not None:
            self._ready = True  # started by _completed, after the fsync in flight
            return
        if self._want_aio and self._start_async():
            return
        self._run_inline()

    def _run_inline(self) -> None:
        """Write and fsync the gathered round on this thread, then call its waiters."""
        waiters, keys = self._take()
        error: BaseException | None = None
        try:
            self.store.wait_durable(self.store.write_ticket())
        except Exception as exc:  # noqa: BLE001  (a closed or poisoned store: tell waiters)
            error = exc
        self._release(keys)
        self._call(waiters, error)

    def _run_threaded(self) -> None:
        """Hand the gathered round to the store's committer thread; call its waiters on
        the loop once it is durable (and confirmed)."""
        since, self._since = self._since, 0
        waiters, keys = self._take()
        gen = self._gen - 1
        try:
            fut = self.store.when_durable(  # type: ignore[attr-defined]
                self.store.write_ticket(), since)
        except Exception as exc:  # noqa: BLE001  (closed or poisoned: tell the waiters)
            self._release(keys)
            self._call(waiters, exc)
            return
        self._flying[gen] = waiters
        loop = asyncio.get_running_loop()

        def done(f: Any) -> None:
            exc = f.exception()
            loop.call_soon_threadsafe(self._landed, gen, keys, exc)

        fut.add_done_callback(done)

    def _landed(self, gen: int, keys: list[Hashable], error: BaseException | None) -> None:
        waiters = self._flying.pop(gen)
        dirty = self._dirty
        for k in keys:
            if dirty.get(k) == gen:
                del dirty[k]
        self.unconfirmed = error is not None
        self._call(waiters, error)

    # --- rounds fsynced through AIO -----------------------------------------------------
    def _start_async(self) -> bool:
        """Write the round and submit its fsyncs; False to fsync inline instead."""
        if self._aio is None:
            self._aio = open_aio()
            if self._aio is None:
                self._want_aio = False
                return False
            asyncio.get_running_loop().add_reader(self._aio.fileno(), self._completed)
        store = cast("SplitRounds", self.store)
        try:
            begun = store.begin_round(self.settle)
        except Exception as exc:  # noqa: BLE001  (closed or poisoned: tell the waiters)
            waiters, keys = self._take()
            self._release(keys)
            self._call(waiters, exc)
            return True
        if begun is None:
            return False  # a round is running on another thread: wait for it inline
        number, staged = begun
        waiters, keys = self._take()
        try:
            syncs = staged.sync_requests()
        except Exception as exc:  # noqa: BLE001  (a poisoned log: the round fails)
            self._end(waiters, number, staged, keys, exc)
            return True
        try:
            ids = set(self._aio.submit(syncs)) if syncs else set()
        except OSError:  # the kernel refused AIO here (e.g. a filesystem without it)
            self._want_aio = False  # from now on inline; this round's fsyncs too
            error: BaseException | None = None
            try:
                for fd, data_only in syncs:
                    fsync_fd(fd, data_only=data_only)
            except OSError as exc:
                error = exc
            self._end(waiters, number, staged, keys, error)
            return True
        self._inflight = (waiters, number, staged, ids, keys)
        self._submitted = time.perf_counter()
        if not ids:
            self._complete(None)
        return True

    def _completed(self) -> None:
        """The eventfd is readable: reap, and close the round once its fsyncs are done."""
        assert self._aio is not None
        reaped = self._aio.reap()
        inflight = self._inflight
        if inflight is None:
            return
        inflight[3].difference_update(done for done, _ in reaped)
        error = _fsync_error(reaped)
        if error is not None or not inflight[3]:
            if error is None:  # what the round's writers waited (storage/pacing.py)
                SYNCS.observe(time.perf_counter() - self._submitted)
            self._complete(error)

    def _complete(self, error: BaseException | None) -> None:
        """End the round in flight; start the one gathered behind it, if its passes are done."""
        assert self._inflight is not None
        waiters, number, staged, _, keys = self._inflight
        self._inflight = None
        self._end(waiters, number, staged, keys, error)
        if self._ready:
            self._ready = False
            self._finish()

    def _end(self, waiters: list[Waiter], number: int, staged: Any, keys: list[Hashable],
             error: BaseException | None) -> None:
        cast("SplitRounds", self.store).end_round(number, staged, error)
        self._release(keys)
        self._call(waiters, error)

    def settle(self) -> None:
        """Finish the round in flight now (blocking), and the round gathered behind it
        (inline): the store is closing."""
        if self._inflight is not None and self._aio is not None:
            waiters, number, staged, _, keys = self._inflight
            self._inflight = None
            self._end(waiters, number, staged, keys, _fsync_error(self._aio.reap(block=True)))
        if self._ready:  # its passes are done, so nothing else would start it
            self._ready = False
            self._run_inline()

    def close(self) -> None:
        """Settle the round in flight and let go of the AIO context (before the store
        closes; on the loop thread)."""
        self.settle()
        if self._aio is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                asyncio.get_running_loop().remove_reader(self._aio.fileno())
            self._aio.close()
            self._aio = None

    @staticmethod
    def _call(waiters: list[Waiter], error: BaseException | None) -> None:
        for fn in waiters:
            fn(error)


def _nothing(_error: BaseException | None) -> None:
    """The waiter :meth:`LoopRounds.mark` adds so that a round is scheduled."""


def _fsync_error(reaped: list[tuple[int, int]]) -> OSError | None:
    """The first failure among reaped fsyncs ``(id, errno)``, as an OSError."""
    err = next((e for _, e in reaped if e), 0)
    return OSError(err, f"fsync of a log failed: {os.strerror(err)}") if err else None
