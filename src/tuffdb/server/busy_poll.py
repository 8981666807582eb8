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
busy. A/1 3.68k/3.65k -> 3.99k/3.80k (200 us); the 8-client cells moved within the
runs' noise (B/8 29.5k/29.6k/25.6k without, 27.5k/28.7k/28.0k with; A/8
11.4k/12.1k/9.9k without, 10.6k/11.3k/11.3k with).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEFAULT_WINDOW_US = 100  # TUFFDB_BUSY_POLL_US overrides; 0 turns it off


class BusyPoll:
    def __init__(self, window_us: float, may_spin: Callable[[], bool]) -> None:
        self.window = window_us / 1e6
        self.may_spin = may_spin
        self.last = 0.0
        self.spinning = False
        self.spins = 0  # hops made (tests, metrics)

    def touch(self) -> None:
        """Input arrived (called from the protocol's data_received, on the loop thread)."""
        if self.window <= 0:
            return
        self.last = time.perf_counter()
        if not self.spinning:
            self.spinning = True
            asyncio.get_running_loop().call_soon(self._spin)

    def _spin(self) -> None:
        if time.perf_counter() - self.last < self.window and self.may_spin():
            self.spins += 1
            asyncio.get_running_loop().call_soon(self._spin)
        else:
            self.spinning = False
