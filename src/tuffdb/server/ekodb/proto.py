"""HTTP/1.1 over asyncio.Protocol + httptools for the ekoDB face: parse, queue, reply.

Requests on one connection are answered in order (pipelining works) through
``handler(request)``, which returns a Response (written at once, from the parser's
callback: no task or coroutine per request), a :class:`Deferred` (a durable write: the
group-commit round writes it when it completes) or an awaitable of one; later requests
wait their turn. Bodies over
``max_body`` bytes are refused with 413 before they are buffered, malformed HTTP gets
a 400 and the connection is closed. Every reply has a body and a Content-Length;
replies of 1 KiB or more are gzipped when the client accepts gzip.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
from collections import deque
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import httptools

from tuffdb.server.busy_poll import BusyPoll

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

GZIP_MIN_BYTES = 1024
MAX_BODY_BYTES = 32 * 1024 * 1024


# Request and Response are plain classes, not dataclasses: compiled (mypyc), a dataclass
# still runs the interpreted __init__ the dataclasses module generates (a Response took
# 179 ns to build from Python that way, 102 ns now; every request builds both).
class Request:
    __slots__ = ("body", "headers", "keep_alive", "method", "peer", "url")

    def __init__(self, method: str, url: bytes, headers: dict[str, str], body: bytes = b"",
                 keep_alive: bool = True, peer: str = "") -> None:  # noqa: FBT001, FBT002
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.peer = peer

    def __repr__(self) -> str:
        return f"Request({self.method} {self.url!r})"


class Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, content_type: str = "application/json",
                 headers: list[tuple[str, str]] | None = None) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers: list[tuple[str, str]] = [] if headers is None else headers

    def __repr__(self) -> str:
        return f"Response({self.status}, {len(self.body)} bytes, {self.content_type!r})"


class Deferred:
    """A reply known later: a durable write's, once its group-commit round is on disk.

    The handler makes one and gives :meth:`ready` to the round as its waiter; the
    connection sets :attr:`deliver` as soon as the handler returns it. The round's
    completion then writes the reply itself: no future, no task and no loop hop between
    the fsync's completion and the socket write (a future costs two ``call_soon`` hops
    and four objects per write). ``make(error)`` builds the reply (``error``: the failure
    that kept the round from disk).
    """

    def __init__(self, make: Callable[[BaseException | None], Response]) -> None:
        self.make = make
        self.deliver: Callable[[Response], None] | None = None
        self.early: Response | None = None  # ready before ``deliver`` was set

    def ready(self, error: BaseException | None) -> None:
        """The round is over (a waiter: never raises into the round's other waiters)."""
        try:
            resp = self.make(error)
        except Exception as exc:  # noqa: BLE001 - the client gets a 500, the round goes on
            resp = _internal(exc)
        deliver = self.deliver
        if deliver is None:
            self.early = resp
            return
        try:
            deliver(resp)
        except Exception as exc:  # noqa: BLE001 - one connection's failure, reported
            asyncio.get_running_loop().call_exception_handler(
                {"message": "delivering a durable reply failed", "exception": exc})


def json_response(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":")).encode(), "application/json",
                    headers or [])


def error_response(status: int, message: str) -> Response:
    return json_response(status, {"code": status, "message": message})


_REASONS = {int(s): s.phrase for s in HTTPStatus}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")


_METHODS = {m.encode(): m for m in ("GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS")}

_OK_JSON = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "


def serialize(resp: Response, *, keep_alive: bool, gzip_ok: bool) -> bytes:
    body = resp.body
    extra = resp.headers
    if (resp.status == 200 and keep_alive and not extra and resp.content_type == "application/json"
            and not (gzip_ok and len(body) >= GZIP_MIN_BYTES)):
        return b"%s%d\r\n\r\n%s" % (_OK_JSON, len(body), body)  # the common reply, at once
    if gzip_ok and len(body) >= GZIP_MIN_BYTES:
        body = gzip.compress(body, compresslevel=5)
        extra = [*extra, ("Content-Encoding", "gzip")]
    lines = [f"HTTP/1.1 {resp.status} {_reason(resp.status)}",
             f"Content-Type: {resp.content_type}", f"Content-Length: {len(body)}"]
    if not keep_alive:
        lines.append("Connection: close")
    lines.extend(f"{k}: {v}" for k, v in extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, handler: Callable[[Request], Response | Deferred | Awaitable[Response]],
                 max_body: int = MAX_BODY_BYTES, poller: BusyPoll | None = None) -> None:
        self.handler = handler
        self.poller = poller  # told of input and of deferred replies (busy_poll.py)
        self.max_body = max_body
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: deque[Request] = deque()
        self.busy = False  # a reply is pending (or a stream owns the connection)
        self.task: asyncio.Task[None] | None = None  # a takeover's
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._refused: Response | None = None
        self._closing = False
        self.peer = ""
        self.upgraded: bytearray | None = None  # bytes after an Upgrade request (WebSocket)
        self.raw_sink: Callable[[bytes | None], None] | None = None  # set by a Takeover

    # --- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else ""

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 - asyncio.Protocol signature
        self._closing = True
        if self.raw_sink is not None:
            self.raw_sink(None)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if self.poller is not None:
            self.poller.touch(self)
        if self.upgraded is not None:  # the connection left HTTP: bytes belong to the stream
            if self.raw_sink is not None:
                self.raw_sink(data)
            else:
                self.upgraded += data
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            self.upgraded = bytearray(data[exc.args[0]:] if exc.args else b"")
        except httptools.HttpParserError as err:
            self._fail(self._refused or error_response(400, f"malformed HTTP request: {err}"))

    def _fail(self, resp: Response) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(serialize(resp, keep_alive=False, gzip_ok=False))
            self.transport.close()
        self._closing = True

    # --- httptools callbacks --------------------------------------------------------
    # No on_message_begin and no on_headers_complete: each callback httptools makes is a
    # call into Python (~2.7 % of cache-tier YCSB A's loop in process for those two), so
    # a message's state is reset when the previous one completes, and the declared
    # length is checked as its header arrives (still before any of the body is buffered).
    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = self._headers[key] = value.decode("latin-1")
        if key == "content-length" and text.isdigit() and int(text) > self.max_body:
            self._refused = error_response(413, f"body over {self.max_body} bytes; send less")
            raise httptools.HttpParserError("body too large")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.max_body:
            self._refused = error_response(413, f"body over {self.max_body} bytes; send less")
            raise httptools.HttpParserError("body too large")
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        method = parser.get_method()
        req = Request(_METHODS.get(method) or method.decode(), self._url, self._headers,
                      b"".join(self._body), parser.should_keep_alive(), self.peer)
        self._url, self._headers, self._body, self._size = b"", {}, [], 0  # the next one's
        self.queue.append(req)
        if not self.busy:
            self._process()

    # --- replies, in request order --------------------------------------------------
    def _process(self) -> None:
        """Answer queued requests. A Response is written at once (no task, no coroutine);
        a pending one (a durable write) holds the queue until its future is done."""
        while self.queue and not self._closing:
            req = self.queue.popleft()
            try:
                resp = self.handler(req)
            except Exception as exc:  # noqa: BLE001 - last resort: never drop a request silently
                resp = _internal(exc)
            if isinstance(resp, Deferred):
                if resp.early is None:
                    self.busy = True
                    resp.deliver = functools.partial(self._deliver, req)
                    return
                resp = resp.early
            elif not isinstance(resp, Response):
                self.busy = True
                fut = asyncio.ensure_future(resp)
                fut.add_done_callback(functools.partial(self._resume, req))
                return
            if not self._send(req, resp):
                return

    def _deliver(self, req: Request, resp: Response) -> None:
        """A Deferred reply is ready: write it and go on with the queue."""
        self.busy = False
        if self._send(req, resp):
            if self.poller is not None:  # the client's next request is due: stay awake
                self.poller.touch(self)
            self._process()

    def _resume(self, req: Request, fut: asyncio.Future[Response]) -> None:
        if fut.cancelled():
            self.busy = False
            return  # the connection went away
        exc = fut.exception()
        self._deliver(req, _internal(exc) if exc is not None else fut.result())

    def _send(self, req: Request, resp: Response) -> bool:
        """Write ``resp``; False when the connection is done with HTTP (closed or taken
        over by a stream)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        takeover = takeover_of(resp)
        if takeover is not None:  # WebSocket / SSE (ws.py, sse.py) own it now
            self.queue.clear()
            self.busy = True
            self.task = asyncio.get_running_loop().create_task(takeover(self))
            return False
        gz = "gzip" in req.headers.get("accept-encoding", "")
        transport.write(serialize(resp, keep_alive=req.keep_alive, gzip_ok=gz))
        if not req.keep_alive or self.upgraded is not None:
            transport.close()
            self._closing = True
            return False
        return True


def takeover_of(resp: Response) -> Callable[[HttpProtocol], Coroutine[Any, Any, None]] | None:
    """The stream that takes the connection over with ``resp`` (WebSocket, SSE), or None.
    A plain Response has none: skipping its getattr matters (a miss raises and catches an
    AttributeError inside: ~2 % of the loop's time for cache-tier YCSB A in process)."""
    return None if type(resp) is Response else getattr(resp, "takeover", None)


def _internal(exc: BaseException) -> Response:
    return error_response(500, f"internal error: {exc.__class__.__name__}: {exc}")
