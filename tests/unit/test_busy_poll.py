"""The loop's idle spin (server/busy_poll.py) on a real event loop."""

from __future__ import annotations

import asyncio

from tuffdb.server.busy_poll import BusyPoll


def test_input_starts_a_spin_that_ends_once_the_window_passes() -> None:
    async def main() -> None:
        poller = BusyPoll(1000, lambda: True)  # 1 ms
        conn = object()
        poller.touch(conn)
        assert not poller.spinning  # its first input marks the window shared
        while poller.spins == 0:  # then it sends alone: the loop spins
            poller.touch(conn)
            await asyncio.sleep(0)
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
        held.touch(object())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert held.spins == 0 and not held.spinning
        off = BusyPoll(0, lambda: True)
        off.touch(object())
        assert not off.spinning

    asyncio.run(main())


def test_no_spin_while_several_connections_send() -> None:
    async def main() -> None:
        poller = BusyPoll(10_000_000, lambda: True)  # 10 s: only sharing can stop it
        a, b = object(), object()
        for _ in range(20):  # two clients taking turns: the loop has company
            poller.touch(a)
            assert not poller.spinning  # not even a hop scheduled per request
            await asyncio.sleep(0)
            poller.touch(b)
            assert not poller.spinning
            await asyncio.sleep(0)
        assert poller.spins == 0

    asyncio.run(main())
