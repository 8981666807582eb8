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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

Waiter = Callable[[BaseException | None], None]


class DurableStore(Protocol):
    def write_ticket(self) -> int: ...
    def wait_durable(self, ticket: int) -> None: ...


EXTRA_PASSES = 2  # loop passes a round waits for more requests before its fsync


class LoopRounds:
    def __init__(self, store: DurableStore) -> None:
        self.store = store
        self._round: list[Waiter] = []
        self._passes = 0

    def after_round(self, fn: Waiter) -> None:
        """Call ``fn(error)`` once every write made so far is durable. ``error`` is the
        failure that poisoned the store, if any: then nothing in the round is durable."""
        if not self._round:
            self._passes = 0
            asyncio.get_running_loop().call_soon(self._hop)
        self._round.append(fn)

    def _hop(self) -> None:
        if self._passes < EXTRA_PASSES:
            self._passes += 1
            asyncio.get_running_loop().call_soon(self._hop)
            return
        self._finish()

    def after_writes_seen(self, fn: Waiter) -> bool:
        """For a reader: join this pass's round if writes are waiting for it, so no reply
        shows a write a crash could still lose. False when everything written is already
        durable (every write joins a round, which stays pending until its fsync)."""
        if not self._round:
            return False
        self._round.append(fn)
        return True

    def future(self) -> asyncio.Future[None]:
        """:meth:`after_round` as a future (to await, or to gather with others)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(exc: BaseException | None) -> None:
            if fut.done():  # cancelled meanwhile
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        self.after_round(done)
        return fut

    def _finish(self) -> None:
        waiters, self._round = self._round, []
        error: BaseException | None = None
        try:
            self.store.wait_durable(self.store.write_ticket())
        except Exception as exc:  # noqa: BLE001  (a closed or poisoned store: tell waiters)
            error = exc
        for fn in waiters:
            fn(error)
