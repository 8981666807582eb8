"""Rounds fsynced through Linux AIO (storage/aio_sync.py, server/loop_rounds.py): real
files, a real KVStore, a real event loop."""

from __future__ import annotations

import asyncio
import os
import platform
import select
import sys
from pathlib import Path

import pytest

from tuffdb.errors import PoisonedError
from tuffdb.kv.store import KVStore
from tuffdb.server.loop_rounds import LoopRounds
from tuffdb.storage.aio_sync import open_aio

SUPPORTED = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")


# tuffdb's CI and servers are Linux (x86_64 or aarch64); elsewhere open_aio() is None and
# the tests below that need it fail rather than skip.
def test_open_aio_is_there_where_supported() -> None:
    aio = open_aio()
    assert (aio is not None) == SUPPORTED
    if aio is not None:
        aio.close()


def test_fsync_completes_through_the_eventfd(tmp_path: Path) -> None:
    aio = open_aio()
    assert aio is not None
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x" * 4096)
        ids = aio.submit([(fd, True), (fd, False)])
        assert len(set(ids)) == 2 and aio.outstanding == 2
        done: list[tuple[int, int]] = []
        while len(done) < 2:
            select.select([aio.fileno()], [], [], 10)
            done += aio.reap()
        assert sorted(done) == sorted((i, 0) for i in ids)
        assert aio.outstanding == 0
    finally:
        os.close(fd)
        aio.close()


def test_fsync_of_a_bad_descriptor_reports_its_errno(tmp_path: Path) -> None:
    aio = open_aio()
    assert aio is not None
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    try:
        with pytest.raises(OSError) as err:
            aio.submit([(fd, True)])
            raise OSError(dict(aio.reap(block=True)).popitem()[1], "reaped")
        assert err.value.errno == 9  # EBADF, refused at submit or reported at reap
    finally:
        aio.close()


async def _acked(rounds: LoopRounds) -> list[BaseException | None]:
    got: list[BaseException | None] = []
    done = asyncio.get_running_loop().create_future()

    def waiter(exc: BaseException | None) -> None:
        got.append(exc)
        done.set_result(None)

    rounds.after_round(waiter)
    await asyncio.wait_for(done, 30)
    return got


def test_a_round_is_acknowledged_once_its_log_is_fsynced(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)

    async def main() -> None:
        for i in range(3):
            store.put(b"k%d" % i, b"v%d" % i, sync=False)
            ticket = store.write_ticket()
            assert await _acked(rounds) == [None]
            assert store._committer.durable_ticket >= ticket  # noqa: SLF001
            assert rounds._inflight is None  # noqa: SLF001
        # A round gathered while another is in flight runs after it, in order.
        order: list[int] = []
        store.put(b"a", b"1", sync=False)
        first = asyncio.get_running_loop().create_future()
        rounds.after_round(lambda e: (order.append(1), first.set_result(e)))
        await asyncio.sleep(0)
        store.put(b"b", b"2", sync=False)
        second = asyncio.get_running_loop().create_future()
        rounds.after_round(lambda e: (order.append(2), second.set_result(e)))
        assert await asyncio.wait_for(asyncio.gather(first, second), 30) == [None, None]
        assert order == [1, 2]
        assert (rounds._aio is not None) == SUPPORTED  # noqa: SLF001
        rounds.close()

    asyncio.run(main())
    store.close()
    again = KVStore.open(tmp_path, durability="always")
    assert [again.get(k) for k in (b"k0", b"k2", b"a", b"b")] == [b"v0", b"v2", b"1", b"2"]
    again.close()


def test_closing_the_store_settles_a_round_in_flight(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)
    got: list[BaseException | None] = []

    async def main() -> None:
        store.put(b"k", b"v", sync=False)
        rounds.after_round(got.append)
        rounds._finish()  # noqa: SLF001 - submit now; the loop cannot reap before close
        assert rounds._inflight is not None and got == []  # noqa: SLF001
        store.close()  # from the loop thread: the round in flight is settled first

    asyncio.run(main())
    assert got == [None]
    again = KVStore.open(tmp_path, durability="always")
    assert again.get(b"k") == b"v"
    again.close()


def test_a_poisoned_store_fails_the_round_instead_of_acknowledging(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)

    async def main() -> list[BaseException | None]:
        store.put(b"k", b"v", sync=False)
        store._poison.set(OSError(5, "EIO (injected)"))  # noqa: SLF001 - a failed fsync's state
        return await _acked(rounds)

    got = asyncio.run(main())
    assert len(got) == 1 and isinstance(got[0], PoisonedError)
    rounds.close()
    store.close()


def test_closing_the_rounds_settles_the_round_in_flight_and_the_one_behind_it(
        tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)
    got: list[tuple[str, BaseException | None]] = []

    async def main() -> None:
        store.put(b"first", b"1", sync=False)
        rounds.after_round(lambda e: got.append(("first", e)))
        rounds._finish()  # noqa: SLF001 - submitted; the loop cannot reap before close
        store.put(b"second", b"2", sync=False)
        rounds.after_round(lambda e: got.append(("second", e)))
        rounds._finish()  # noqa: SLF001 - its passes done: waits behind the one in flight
        assert rounds._inflight is not None and rounds._ready  # noqa: SLF001
        rounds.close()  # settles both, in order, before the store closes

    asyncio.run(main())
    assert got == [("first", None), ("second", None)]
    store.close()
    again = KVStore.open(tmp_path, durability="always")
    assert (again.get(b"first"), again.get(b"second")) == (b"1", b"2")
    again.close()


def test_a_kernel_refusing_aio_fsync_falls_back_to_inline_without_poisoning(
        tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)

    async def main() -> None:
        store.put(b"a", b"1", sync=False)
        assert await _acked(rounds) == [None]  # the AIO context is set up by now
        aio = rounds._aio  # noqa: SLF001
        assert aio is not None
        aio._libc.syscall(aio._destroy, aio._ctx)  # noqa: SLF001 - io_submit now gets EINVAL
        with pytest.raises(OSError):
            aio.submit([(0, True)])  # the kernel's own refusal
        store.put(b"b", b"2", sync=False)
        assert await _acked(rounds) == [None]  # fsynced inline instead, nothing poisoned
        assert not rounds._want_aio  # noqa: SLF001
        store.put(b"c", b"3", sync=False)
        assert await _acked(rounds) == [None]
        asyncio.get_running_loop().remove_reader(aio.fileno())
        aio._efd, efd = -1, aio._efd  # noqa: SLF001 - its context is gone; just the eventfd
        os.close(efd)
        rounds._aio = None  # noqa: SLF001

    asyncio.run(main())
    store.close()
    again = KVStore.open(tmp_path, durability="always")
    assert [again.get(k) for k in (b"a", b"b", b"c")] == [b"1", b"2", b"3"]
    again.close()
