"""Under ``durable_operations`` a read never shows a write before the write is durable
(server/loop_rounds.py ``mark`` / ``keys_round``, ekodb/app.py ``_when_seen``): a
by-id read of a record whose write waits for a round is answered with that round, a read
of another record at once, and any other read waits for every round not yet durable.
Real store, real fsync (through AIO), a real event loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tuffdb import metrics
from tuffdb.kv.store import KVStore
from tuffdb.server.config import ServeConfig
from tuffdb.server.ekodb.server import EkoDBFace
from tuffdb.server.ekodb.proto import Deferred, Request, Response
from tuffdb.server.loop_rounds import LoopRounds, Waiter


def _held(rounds: LoopRounds, keys: list[bytes], fn: Waiter) -> bool:
    """Join ``fn`` to the round holding a reader of ``keys``, as the ekoDB app does."""
    waiters = rounds.keys_round(keys)
    if waiters is None:
        return False
    waiters.append(fn)
    return True


def test_a_reader_of_a_marked_key_waits_for_the_round_its_write_joined(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)
    calls: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        store.put(b"a", b"1", sync=False)
        rounds.mark([b"a"])
        rounds.after_round(lambda e: calls.append("write a"))
        assert _held(rounds, [b"a"], lambda e: calls.append("read a (gathering)"))
        rounds._finish()  # noqa: SLF001 - submit now: the round of "a" is in flight
        assert rounds.syncing
        store.put(b"b", b"2", sync=False)
        rounds.mark([b"b"])
        done = loop.create_future()
        rounds.after_round(lambda e: (calls.append("write b"), done.set_result(e)))
        assert _held(rounds, [b"a"], lambda e: calls.append("read a (in flight)"))
        assert _held(rounds, [b"b"], lambda e: calls.append("read b"))
        # a read of "a" and "b" together waits for the later round, "b"'s
        assert _held(rounds, [b"a", b"b"], lambda e: calls.append("read a+b"))
        assert not _held(rounds, [b"c"], lambda e: calls.append("read c"))
        assert calls == []
        assert await asyncio.wait_for(done, 30) is None
        assert calls == ["write a", "read a (gathering)", "read a (in flight)",
                         "write b", "read b", "read a+b"]
        # both rounds are durable: nothing holds a reader now
        assert not _held(rounds, [b"a", b"b"], lambda e: calls.append("late"))
        assert not rounds.holds_readers
        rounds.close()

    asyncio.run(main())
    store.close()


def test_a_key_written_again_stays_held_until_its_later_round(tmp_path: Path) -> None:
    store = KVStore.open(tmp_path, durability="always")
    rounds = LoopRounds(store, aio=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        store.put(b"k", b"1", sync=False)
        rounds.mark([b"k"])
        held: list[BaseException | None] = []
        when_first_done: list[bool] = []

        def first_done(_error: BaseException | None) -> None:
            # the first round is durable now, the second (the key's later write) is not:
            # asked from the first round's own waiter, so the second cannot have ended
            when_first_done.append(second.done())
            when_first_done.append(_held(rounds, [b"k"], held.append))

        rounds.after_round(first_done)
        rounds._finish()  # noqa: SLF001 - the first write's round is in flight
        store.put(b"k", b"2", sync=False)
        rounds.mark([b"k"])
        second = loop.create_future()
        rounds.after_round(second.set_result)
        await asyncio.wait_for(second, 30)
        assert when_first_done == [False, True]  # still held after its first round
        assert held == [None]  # and answered with the later round
        assert not _held(rounds, [b"k"], held.append)
        rounds.close()

    asyncio.run(main())
    store.close()


class _Face:
    def __init__(self, tmp_path: Path) -> None:
        cfg = ServeConfig(data_dir=tmp_path, host="127.0.0.1", http_port=0,
                          durability="always", extra={"http": {"durable_operations": True}})
        self.face = EkoDBFace(cfg)
        self.app = self.face.app
        admin = (tmp_path / "ekodb_admin_key").read_text().strip()
        resp = self.app.handle(self.request("POST", "/api/auth/token", {"api_key": admin}))
        assert isinstance(resp, Response), resp
        self.token = json.loads(resp.body)["token"]

    def request(self, method: str, path: str, body: Any = None) -> Request:
        headers = {"content-type": "application/json"}
        if getattr(self, "token", None):
            headers["authorization"] = f"Bearer {self.token}"
        return Request(method, path.encode(), headers,
                       b"" if body is None else json.dumps(body).encode())

    def call(self, method: str, path: str, body: Any = None) -> Response | Deferred:
        out = self.app.handle(self.request(method, path, body))
        assert isinstance(out, (Response, Deferred)), out
        return out


async def _reply(out: Response | Deferred, seen: list[str] | None = None,
                 name: str = "") -> Response:
    if isinstance(out, Response):
        return out
    if out.early is not None:
        return out.early
    fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

    def deliver(resp: Response) -> None:
        if seen is not None:
            seen.append(name)
        fut.set_result(resp)

    out.deliver = deliver
    return await asyncio.wait_for(fut, 30)


def _value(resp: Response) -> Any:
    assert resp.status == 200, resp.body
    v = json.loads(resp.body)["v"]
    return v["value"] if isinstance(v, dict) else v


def test_http_reads_do_not_show_a_write_before_it_is_durable(tmp_path: Path) -> None:
    f = _Face(tmp_path)
    kv = f.face.db.kv

    async def main() -> None:
        for rid in ("a", "b"):
            ins = await _reply(f.call("POST", "/api/insert/c", {"id": rid, "v": 1}))
            assert ins.status == 200, ins.body
        assert isinstance(f.call("GET", "/api/find/c/a"), Response)  # nothing waits now
        held_before = metrics.EKODB_READS_HELD.value
        # one loop pass: a write, then readers of the same record, another record, a query
        write = f.call("PUT", "/api/update/c/a", {"v": 2})
        ticket = kv.write_ticket()
        same = f.call("GET", "/api/find/c/a")
        other = f.call("GET", "/api/find/c/b")
        query = f.call("POST", "/api/find/c", {})
        assert isinstance(write, Deferred) and isinstance(same, Deferred)
        assert isinstance(query, Deferred)
        assert isinstance(other, Response) and _value(other) == 1  # not held
        assert metrics.EKODB_READS_HELD.value == held_before + 2  # counted for operators
        order: list[str] = []
        durable_when_read: list[bool] = []

        async def read_same() -> Response:
            resp = await _reply(same, order, "read")
            durable_when_read.append(kv.when_durable(ticket).done())
            return resp

        w, r, q = await asyncio.gather(_reply(write, order, "write"), read_same(),
                                       _reply(query, order, "query"))
        assert order == ["write", "read", "query"]
        assert durable_when_read == [True]
        assert _value(w) == 2 and _value(r) == 2
        assert q.status == 200 and {x["id"] for x in json.loads(q.body)} == {"a", "b"}
        again = f.call("GET", "/api/find/c/a")  # durable now: answered at once
        assert isinstance(again, Response) and _value(again) == 2
        # a collection's drop holds a by-id reader of any of its records
        drop = f.call("DELETE", "/api/collections/c")
        gone = f.call("GET", "/api/find/c/b")
        assert isinstance(drop, Deferred) and isinstance(gone, Deferred)
        assert (await _reply(drop)).status == 200
        assert (await _reply(gone)).status == 404
        f.app.close()

    asyncio.run(main())
    f.face.db.close()


def test_a_websocket_read_waits_for_pending_writes(tmp_path: Path) -> None:
    f = _Face(tmp_path)

    async def main() -> None:
        assert f.app.visible() is None  # nothing written: a read goes at once
        write = f.call("POST", "/api/insert/c", {"id": "a", "v": 1})
        seen = f.app.visible()
        assert seen is not None and not seen.done()
        ins = await _reply(write)
        assert ins.status == 200
        await asyncio.wait_for(seen, 30)
        assert f.app.visible() is None
        f.app.close()

    asyncio.run(main())
    f.face.db.close()
