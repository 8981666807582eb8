"""The loop's idle spin (server/busy_poll.py) on a real event loop."""

from __future__ import annotations

import asyncio

from tuffdb.server.busy_poll import BusyPoll


def test_input_starts_a_spin_that_ends_once_the_window_passes() -> None:
    async def main() -> None:
        poller = BusyPoll(1000, lambda: True)  # 1 ms
        poller.touch()
        assert poller.spinning
        while poller.spinning:  # each hop polls the loop, then re-arms or stops
            await asyncio.sleep(0)
        assert poller.spins > 0
        spins = poller.spins
        for _ in range(10):  # no input: no more hops
            await asyncio.sleep(0)
        assert poller.spins == spins and not poller.spinning

    asyncio.run(main())


def test_no_spin_while_not_allowed_or_with_a_zero_window() -> None:
    async def main() -> None:
        held = BusyPoll(10_000_000, lambda: False)  # an fsync in flight: never spin
        held.touch()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert held.spins == 0 and not held.spinning
        off = BusyPoll(0, lambda: True)
        off.touch()
        assert not off.spinning

    asyncio.run(main())
