"""The admin endpoint over real loopback sockets: routing, limits, keep-alive.

It is exposed to whatever can reach the admin port, so it must answer malformed,
oversized and unexpected requests with an error status instead of hanging or dying.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from tuffdb.metrics import REGISTRY
from tuffdb.server.admin import MAX_HEAD_BYTES, AdminServer

Exchange = Callable[[bytes], Awaitable[bytes]]


def run_with_server(
    test: Callable[[Exchange], Awaitable[None]],
    health: tuple[int, dict[str, Any]] = (200, {"status": "ok"}),
) -> None:
    async def main() -> None:
        server = AdminServer("127.0.0.1", 0, lambda: health, lambda: {"resp": True})
        await server.start()
        port = int(server.address.rsplit(":", 1)[1])

        async def exchange(raw: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw)
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), 10)  # until the server closes
            writer.close()
            return data

        try:
            await test(exchange)
        finally:
            await server.stop()

    asyncio.run(main())


def status_lines(data: bytes) -> list[bytes]:
    return re.findall(rb"HTTP/1\.1 \d{3} [^\r]*", data)


def test_health_returns_the_health_document_and_its_status() -> None:
    async def check(exchange: Exchange) -> None:
        data = await exchange(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_lines(data) == [b"HTTP/1.1 503 Service Unavailable"]
        assert b"application/json" in data
        assert data.endswith(b'{"status": "degraded"}\n')

    run_with_server(check, health=(503, {"status": "degraded"}))


def test_metrics_render_the_registry_and_process_gauges() -> None:
    REGISTRY.counter("tuffdb_test_admin_total", "test counter").inc(3)

    async def check(exchange: Exchange) -> None:
        data = await exchange(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_lines(data) == [b"HTTP/1.1 200 OK"]
        assert b"text/plain; version=0.0.4" in data
        assert b"\ntuffdb_test_admin_total 3\n" in data
        assert b"\ntuffdb_fsyncs_total " in data
        assert b'\ntuffdb_face_up{face="resp"} 1\n' in data
        assert b"\ntuffdb_process_resident_memory_bytes " in data

    run_with_server(check)


def test_pipelined_keep_alive_requests_are_answered_in_order() -> None:
    async def check(exchange: Exchange) -> None:
        data = await exchange(
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
            b"DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert status_lines(data) == [
            b"HTTP/1.1 404 Not Found",
            b"HTTP/1.1 405 Method Not Allowed",
            b"HTTP/1.1 200 OK",
        ]
        assert b"Allow: GET\r\n" in data

    run_with_server(check)


def test_oversized_head_gets_431_and_the_connection_closes() -> None:
    async def check(exchange: Exchange) -> None:
        huge = b"X-Filler: " + b"a" * (MAX_HEAD_BYTES + 1) + b"\r\n"
        data = await exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n" + huge)
        assert status_lines(data) == [b"HTTP/1.1 431 Request Header Fields Too Large"]

    run_with_server(check)


def test_a_request_body_gets_413() -> None:
    async def check(exchange: Exchange) -> None:
        data = await exchange(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        assert status_lines(data) == [b"HTTP/1.1 413 Content Too Large"]

    run_with_server(check)


def test_malformed_request_gets_400() -> None:
    async def check(exchange: Exchange) -> None:
        data = await exchange(b"NOT HTTP AT ALL\r\n\r\n")
        assert status_lines(data) == [b"HTTP/1.1 400 Bad Request"]

    run_with_server(check)


def test_backup_needs_a_bearer_token_when_the_server_has_a_secret() -> None:
    """POST /backup copies every store where the request says: with an operator secret
    configured it runs only for ``Authorization: Bearer <secret>``; probes stay open."""
    calls: list[bytes] = []

    async def backup(body: bytes) -> tuple[int, dict[str, Any]]:
        calls.append(body)
        return 200, {"ok": True}

    async def main() -> None:
        server = AdminServer("127.0.0.1", 0, lambda: (200, {"status": "ok"}),
                             lambda: {"resp": True}, backup, tokens=["s3cret", "pw"])
        await server.start()
        port = int(server.address.rsplit(":", 1)[1])

        async def post(auth: str | None) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            head = f"Authorization: {auth}\r\n" if auth is not None else ""
            writer.write((f"POST /backup HTTP/1.1\r\nHost: x\r\n{head}Content-Length: 2\r\n"
                          "Connection: close\r\n\r\n{}").encode())
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return data

        try:
            for auth in (None, "Bearer nope", "Basic s3cret", "Bearer s3cre", "s3cret"):
                data = await post(auth)
                assert status_lines(data) == [b"HTTP/1.1 401 Unauthorized"], auth
                assert b'WWW-Authenticate: Bearer realm="tuffdb admin"' in data
            assert calls == []
            for auth in ("Bearer s3cret", "bearer pw"):
                assert status_lines(await post(auth)) == [b"HTTP/1.1 200 OK"]
            assert calls == [b"{}", b"{}"]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            await writer.drain()
            assert status_lines(await asyncio.wait_for(reader.read(), 10)) == [
                b"HTTP/1.1 200 OK"]
            writer.close()
        finally:
            await server.stop()

    asyncio.run(main())
