"""Deferred replies (a durable write's): written when the round completes, in request
order, and a reply that fails to build costs its client a 500, not the round's others."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from tuffdb.server.busy_poll import BusyPoll
from tuffdb.server.ekodb.proto import Deferred, HttpProtocol, Request, Response

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import Transport  # noqa: E402


def _conn(handler) -> tuple[HttpProtocol, Transport]:  # noqa: ANN001
    proto = HttpProtocol(handler)
    t = Transport()
    proto.connection_made(t)  # type: ignore[arg-type]
    return proto, t


def _put(path: str) -> bytes:
    return f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode()


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def test_replies_wait_for_the_round_and_keep_request_order() -> None:
    pending: list[Deferred] = []

    def handler(req: Request) -> Response | Deferred:
        body = req.url
        if req.method == "PUT":
            d = Deferred(lambda err: Response(200, body) if err is None else Response(500, b"x"))
            pending.append(d)
            return d
        return Response(200, body)

    proto, t = _conn(handler)
    proto.data_received(_put("/w1") + _get("/r1"))
    assert t.out == []  # the read queued behind the write, which waits for its round
    assert len(pending) == 1
    pending[0].ready(None)
    assert [o.rsplit(b"\r\n\r\n", 1)[1] for o in t.out] == [b"/w1", b"/r1"]


def test_a_round_error_and_a_failing_reply_reach_only_their_clients() -> None:
    rounds: list[Deferred] = []

    def broken(err: BaseException | None) -> Response:
        raise RuntimeError("cannot encode")

    conns = []
    for make in (broken, lambda err: Response(200 if err is None else 503, b"ok")):
        def handler(req: Request, make=make) -> Deferred:  # noqa: ANN001
            d = Deferred(make)
            rounds.append(d)
            return d
        conns.append(_conn(handler))
        conns[-1][0].data_received(_put("/w"))
    for d in rounds:  # as LoopRounds calls its waiters
        d.ready(None)
    first, second = (t.out for _, t in conns)
    assert first[0].startswith(b"HTTP/1.1 500 ") and b"cannot encode" in first[0]
    assert second[0].startswith(b"HTTP/1.1 200 ")


def test_ready_before_delivery_is_written_at_once() -> None:
    d = Deferred(lambda err: Response(200, b"early"))
    d.ready(None)  # the round finished before the connection took the reply
    proto, t = _conn(lambda req: d)
    proto.data_received(_get("/x"))
    assert t.out and t.out[0].endswith(b"early")
    assert not proto.busy


def test_a_deferred_reply_keeps_the_loop_polling_for_its_clients_next_request() -> None:
    async def main() -> None:
        poller = BusyPoll(1000, lambda: True)  # 1 ms
        pending: list[Deferred] = []

        def handler(req: Request) -> Deferred:
            d = Deferred(lambda err: Response(200, b"done"))
            pending.append(d)
            return d

        proto = HttpProtocol(handler, poller=poller)
        t = Transport()
        proto.connection_made(t)  # type: ignore[arg-type]
        proto.data_received(_put("/w"))
        # the request's window passes, as during a round's fsync
        while poller.spinning or time.perf_counter() < poller.shared_until:
            await asyncio.sleep(0)
        spins = poller.spins
        pending[0].ready(None)  # the round completed: the reply goes out
        assert t.out and t.out[0].endswith(b"done")
        assert poller.spinning  # polling again, not asleep, for the next request
        await asyncio.sleep(0)
        assert poller.spins > spins

    asyncio.run(main())
