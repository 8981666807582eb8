"""A cluster follower passes writes on to the leader's HTTP port and relays its answer.

The request goes out as the client sent it (method, path, headers, body; HTTP/1.1 with
``Content-Length``) on a kept-alive connection to the leader, and the leader's status,
content type, body and headers come back unchanged: the client sees what the leader
answered. Connections are pooled per leader address; a pooled one the leader closed while
it sat idle is replaced before anything is sent on it.

A request is sent at most once: once its bytes went out, the leader may have applied it,
so a broken connection or a missing answer is never retried here (a second try could
apply a write twice). The client gets 503 (retryable) only when nothing was sent: no
leader is known, or it cannot be reached. Sent and unanswered it gets 502 (the connection
broke) or 504 (no answer within ``TIMEOUT_S``): the write may or may not have taken effect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from tuffdb.server.ekodb.proto import Request, Response

TIMEOUT_S = 30.0
FORWARDED_HEADER = "x-tuffdb-forwarded"  # set on a forwarded request (headers are lowercase)
LSN_HEADER = "x-tuffdb-lsn"  # the leader's answer to one: the rounds that cover the write
# Not relayed either way: hop-by-hop headers, and those each server writes itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                        "host", "te", "trailer", "upgrade", "proxy-connection", "date",
                        "server", "content-type"})


class Forwarder:
    def __init__(self) -> None:
        self._idle: dict[str, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    async def forward(self, req: Request, address: str | None,
                      read_own_write: Callable[[int], None] | None = None) -> Response:
        """Relay ``req`` to the leader at ``address``. With ``read_own_write``, the
        leader's LSN header is waited for here (off the loop) before the answer goes back,
        so the client reads its write on this node next."""
        resp = await self._relay(req, address)
        lsn = _pop_lsn(resp)
        if lsn is not None and read_own_write is not None:
            await asyncio.get_running_loop().run_in_executor(None, read_own_write, lsn)
        return resp

    async def _relay(self, req: Request, address: str | None) -> Response:
        if address is None:
            return _unavailable("no cluster leader is known yet; retry shortly")
        if req.headers.get(FORWARDED_HEADER):
            # Forwarded once already and this node does not lead either (the two disagree
            # for a moment during a failover): never a second hop, never a loop.
            return _unavailable("the cluster is changing leader; retry shortly")
        conn = await self._connection(address)
        if conn is None:
            return _unavailable(f"the cluster leader at {address} cannot be reached")
        reader, writer = conn
        try:
            writer.write(_encode(req, address))
            resp = await asyncio.wait_for(_read_response(reader), TIMEOUT_S)
        except TimeoutError:
            writer.close()
            return _unanswered(504, f"the cluster leader at {address} did not answer within "
                                    f"{TIMEOUT_S:g} s")
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            writer.close()
            return _unanswered(502, f"the connection to the cluster leader at {address} "
                                    f"failed before its answer ({type(exc).__name__})")
        self._idle.setdefault(address, []).append(conn)
        return resp

    async def _connection(self, address: str
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        idle = self._idle.get(address)
        while idle:
            reader, writer = idle.pop()
            if reader.at_eof() or reader.exception() is not None or writer.is_closing():
                writer.close()  # the leader closed it while it sat idle: never used
                continue
            return reader, writer
        host, _, port = address.rpartition(":")
        try:
            return await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                          TIMEOUT_S)
        except (OSError, TimeoutError):
            return None

    def close(self) -> None:
        for conns in self._idle.values():
            for _, writer in conns:
                with contextlib.suppress(Exception):
                    writer.close()
        self._idle.clear()


def _pop_lsn(resp: Response) -> int | None:
    lsn = None
    kept = []
    for name, value in resp.headers:
        if name.lower() == LSN_HEADER:
            with contextlib.suppress(ValueError):
                lsn = int(value)
        else:
            kept.append((name, value))
    resp.headers[:] = kept
    return lsn


def _encode(req: Request, address: str) -> bytes:
    lines = [f"{req.method} {req.url.decode('latin-1')} HTTP/1.1", f"Host: {address}"]
    lines += [f"{k}: {v}" for k, v in req.headers.items()
              if k.lower() not in HOP_BY_HOP or k.lower() == "content-type"]
    lines += [f"{FORWARDED_HEADER}: 1", f"Content-Length: {len(req.body)}",
              "Connection: keep-alive", "", ""]
    return "\r\n".join(lines).encode("latin-1") + req.body


async def _read_response(reader: asyncio.StreamReader) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: list[tuple[str, str]] = []
    length = 0
    ctype = "application/json"
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        low = name.lower()
        if low == "content-length":
            length = int(value)
        elif low == "content-type":
            ctype = value
        elif low not in HOP_BY_HOP:
            headers.append((name, value))
    body = await reader.readexactly(length) if length else b""
    return Response(status, body, ctype, headers)


def _unavailable(message: str) -> Response:
    """Nothing was sent: the client may retry (the ekoDB client does, on 503)."""
    import json  # noqa: PLC0415 - cold path

    return Response(503, json.dumps({"code": 503, "message": message}).encode(),
                    headers=[("Retry-After", "1")])


def _unanswered(status: int, message: str) -> Response:
    """Sent, and no answer came back: the write may or may not have taken effect."""
    import json  # noqa: PLC0415 - cold path

    text = f"{message}: the write may or may not have taken effect; read before retrying"
    return Response(status, json.dumps({"code": status, "message": text}).encode())
