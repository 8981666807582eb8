"""Busy-poll briefly after input instead of sleeping at once (an event loop's idle spin).

With one client the loop answers a request and goes to sleep in ``epoll_wait``; the next
request then has to wake the thread, and on a virtual machine a sleeping vCPU halts, so
the wake-up costs a VM exit and an interrupt on top of the scheduler's work. After input,
this keeps the loop polling (``epoll_wait`` with a zero timeout, one ``call_soon`` hop at
a time) for ``window_us``, so a request that comes back within it is picked up at once.
Once the window passes without input the loop sleeps as usual: an idle server uses no
CPU. It never spins while ``may_spin()`` is false (a round's fsync in flight: the kernel
worker that runs it needs this core).

Measured (A/B on the compiled build, durable tier, wrk YCSB, alternating runs): C/1
7.4k/8.6k/7.2k ops/s without, 15.6k/14.9k with a 200 us window, 14.6k with 100 us and
8.0k with 50 us (shorter than the client's turn-around); the server's core 54 % -> 87-92 %
busy. A YCSB run with that first version on (durable tier, docs/benchmarks/history/ycsb-busy-poll/,
20261201T050933Z) met 1x PostgreSQL at B/1, C/1, D/1 and C/8, but B/8, D/8 and F/8 fell
well below the run before it: spinning under load keeps the loop's thread runnable on the
one core, probably preempting a background thread that holds the GIL. So it now spins
only while one connection alone is sending (input from another within the window stops
it). That version, A/B: C/1 7.3k/7.3k -> 12.9k/11.3k, B/1 8.3k/7.3k -> 10.2k/10.3k, B/8
25.6k/24.4k -> 23.1k/25.1k (noise).

A durable write's reply is written when its round's fsync completes, long after the
request's input opened the window, so the loop went to sleep right after it and the
client's next request had to wake it. Writing such a reply now counts as input from that
connection (``HttpProtocol._deliver``). A/B on a day of heavy steal (alternating fresh
servers, 13 pairs of 6-8 s cells, docs/benchmarks/history/ycsb-deferred-spin/ab.txt): durable F/1
ahead in 11 of 13 pairs (medians of the last six pairs 1,970 -> 2,285 ops/s), A/1 in 8 of
13 (2,272 -> 2,392: within the noise). Spinning on (with ``sched_yield``) while the fsync
itself is in flight did not help there (A/1 ahead in 2 of 7 pairs, F/1 in 4 of 7).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEFAULT_WINDOW_US = 100  # TUFFDB_BUSY_POLL_US overrides; 0 turns it off


class BusyPoll:
    """Spins only while one connection alone is sending: input from another connection
    within the window means the loop has company (several clients keep it busy anyway)
    and spinning would only crowd the core's other threads."""

    def __init__(self, window_us: float, may_spin: Callable[[], bool]) -> None:
        self.window = window_us / 1e6
        self.may_spin = may_spin
        self.last = 0.0
        self.last_from: object = None
        self.shared_until = 0.0  # another connection sent input: no spinning before this
        self.spinning = False
        self.spins = 0  # hops made (tests, metrics)

    def touch(self, source: object) -> None:
        """Input arrived from ``source`` (a connection; called from data_received, on the
        loop thread), or a reply it waited for was written to it after the round's fsync
        (its next request is due as after input)."""
        if self.window <= 0:
            return
        now = self.last = time.perf_counter()
        if source is not self.last_from:
            self.last_from = source
            self.shared_until = now + self.window
            return  # company: a spin would stop at its first hop (no call_soon per request)
        if not self.spinning and now >= self.shared_until:
            self.spinning = True
            asyncio.get_running_loop().call_soon(self._spin)

    def _spin(self) -> None:
        now = time.perf_counter()
        if now - self.last < self.window and now >= self.shared_until and self.may_spin():
            self.spins += 1
            asyncio.get_running_loop().call_soon(self._spin)
        else:
            self.spinning = False
