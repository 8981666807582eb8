"""A follower's forwarder sends a write to the leader at most once.

The "leader" here is a small HTTP server on loopback that counts the requests it receives
and then answers, breaks the connection, or never answers. Once a request went out, the
forwarder never sends it again (the leader may have applied it): a broken connection is
answered 502, no answer 504, both saying the write may or may not have taken effect. A
pooled connection the leader closed while idle is replaced before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tuffdb.server.ekodb import forward
from tuffdb.server.ekodb.forward import Forwarder
from tuffdb.server.ekodb.proto import Request


class Leader:
    """Answers each request per ``script`` (one action per request, the last repeats):
    ``answer`` (200, kept alive), ``answer-close`` (200, then closes), ``break`` (closes
    without answering), ``hang`` (keeps the connection, never answers)."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.requests = 0
        self.connections = 0
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                action = self.script[min(self.requests, len(self.script) - 1)]
                self.requests += 1
                if action == "hang":
                    await reader.read()  # until the forwarder gives up and closes
                    return
                if action == "break":
                    return
                body = json.dumps({"n": self.requests}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                if action == "answer-close":
                    return
        finally:
            writer.close()
            self.closed.set()


@asynccontextmanager
async def leader(script: list[str]) -> AsyncIterator[tuple[Leader, str]]:
    lead = Leader(script)
    server = await asyncio.start_server(lead.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield lead, f"127.0.0.1:{port}"
    finally:
        server.close()


def _insert() -> Request:
    return Request("POST", b"/api/insert/users", {"content-type": "application/json"},
                   b'{"name": "a"}')


def test_a_connection_broken_after_sending_is_not_retried() -> None:
    async def main() -> None:
        async with leader(["break"]) as (lead, address):
            fwd = Forwarder()
            resp = await fwd.forward(_insert(), address)
            assert resp.status == 502
            assert b"may or may not have taken effect" in resp.body
            assert lead.requests == 1, "the write was sent twice"
            fwd.close()

    asyncio.run(main())


def test_no_answer_in_time_is_504_and_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forward, "TIMEOUT_S", 0.2)

    async def main() -> None:
        async with leader(["hang"]) as (lead, address):
            fwd = Forwarder()
            resp = await fwd.forward(_insert(), address)
            assert resp.status == 504
            assert lead.requests == 1
            fwd.close()

    asyncio.run(main())


def test_a_pooled_connection_the_leader_closed_is_replaced_before_sending() -> None:
    async def main() -> None:
        async with leader(["answer-close", "answer"]) as (lead, address):
            fwd = Forwarder()
            first = await fwd.forward(_insert(), address)
            assert first.status == 200
            await lead.closed.wait()  # the leader closed the connection the forwarder pooled
            (reader, _), = fwd._idle[address]
            for _ in range(1000):  # the loop delivers the EOF within a few passes
                if reader.at_eof():
                    break
                await asyncio.sleep(0)
            assert reader.at_eof()
            second = await fwd.forward(_insert(), address)
            assert second.status == 200 and json.loads(second.body) == {"n": 2}
            assert lead.requests == 2 and lead.connections == 2
            fwd.close()

    asyncio.run(main())


def test_an_unreachable_leader_is_503_retryable() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        resp = await Forwarder().forward(_insert(), f"127.0.0.1:{port}")
        assert resp.status == 503
        assert ("Retry-After", "1") in resp.headers

    asyncio.run(main())
