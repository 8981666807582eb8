"""The HTTP admin endpoint of ``tuffdb serve``: ``GET /health``, ``GET /metrics`` and
``POST /backup``.

A deliberately small HTTP/1.1 server on asyncio streams with ``httptools`` doing the
parsing. It serves two read-only paths to operators and scrapers and one operator
action, so it is strict: 404 for any other path, 405 for a wrong method, 431 for a
request head over :data:`MAX_HEAD_BYTES`, 413 for a body anywhere but ``POST /backup``
(which takes a JSON body of at most :data:`MAX_BODY_BYTES`: ``{"dest": URL}``), and at
most :data:`MAX_CONNECTIONS` open connections; an idle connection is closed after
:data:`IDLE_TIMEOUT_S`. ``POST /backup`` copies every store to a destination the request
names, so when the server has an operator secret (``--api-key`` or ``--requirepass``) it
needs ``Authorization: Bearer <one of them>`` (401 otherwise); ``/health`` and
``/metrics`` stay open to probes and scrapers (they show state, never data). Without a
secret nothing is authenticated: bind the port to a trusted interface (the default host
is 127.0.0.1).
Keep-alive and pipelining work because httptools tracks message boundaries.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httptools

from tuffdb._version import __version__
from tuffdb.log import get_logger
from tuffdb.metrics import REGISTRY
from tuffdb.security.protected import OFF, is_local, peer_host

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
MAX_CONNECTIONS = 64
IDLE_TIMEOUT_S = 30.0
READ_SIZE = 64 * 1024
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found",
            405: "Method Not Allowed",
            409: "Conflict", 413: "Content Too Large", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}
_START = time.monotonic()

log = get_logger(__name__)

# health() returns (HTTP status, JSON body); faces() returns {face name: up?}.
HealthFn = Callable[[], tuple[int, dict[str, Any]]]
FacesFn = Callable[[], dict[str, bool]]
# backup(request body) -> (HTTP status, JSON body), awaited on the loop.
BackupFn = Callable[[bytes], Awaitable[tuple[int, dict[str, Any]]]]


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:  # noqa: PTH123 (hot-ish, tiny file)
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        # Not Linux: peak RSS is the best the portable API offers (KiB on Linux, bytes on macOS).
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def process_metrics(faces: dict[str, bool]) -> str:
    """Process-level gauges rendered in Prometheus text format."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    try:
        fds: int | None = len(os.listdir("/proc/self/fd"))  # noqa: PTH208
    except OSError:
        fds = None
    lines = [
        "# HELP tuffdb_build_info tuffdb version of this process",
        "# TYPE tuffdb_build_info gauge",
        f'tuffdb_build_info{{version="{__version__}"}} 1',
        "# HELP tuffdb_process_uptime_seconds seconds since the process started serving",
        "# TYPE tuffdb_process_uptime_seconds gauge",
        f"tuffdb_process_uptime_seconds {time.monotonic() - _START:.3f}",
        "# HELP tuffdb_process_resident_memory_bytes resident set size",
        "# TYPE tuffdb_process_resident_memory_bytes gauge",
        f"tuffdb_process_resident_memory_bytes {_rss_bytes()}",
        "# HELP tuffdb_process_cpu_seconds_total user plus system CPU time",
        "# TYPE tuffdb_process_cpu_seconds_total counter",
        f"tuffdb_process_cpu_seconds_total {usage.ru_utime + usage.ru_stime:.3f}",
    ]
    if fds is not None:
        lines += ["# HELP tuffdb_process_open_fds open file descriptors",
                  "# TYPE tuffdb_process_open_fds gauge", f"tuffdb_process_open_fds {fds}"]
    lines += ["# HELP tuffdb_face_up 1 if the protocol face is serving",
              "# TYPE tuffdb_face_up gauge"]
    lines += [f'tuffdb_face_up{{face="{name}"}} {int(up)}' for name, up in faces.items()]
    return "\n".join(lines) + "\n"


class _Request:
    """httptools callbacks: collects complete requests as (method, path, keep_alive)."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.done: list[tuple[bytes, bytes, bool, bytes, bytes]] = []
        self.url = b""
        self.has_body = False
        self.body = bytearray()
        self.authorization = b""

    def on_message_begin(self) -> None:
        self.url = b""
        self.has_body = False
        self.body = bytearray()
        self.authorization = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"authorization" and len(value) <= 1024:
            self.authorization = value

    def on_body(self, body: bytes) -> None:
        self.has_body = True
        if len(self.body) <= MAX_BODY_BYTES:
            self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        if self.has_body and (method != b"POST" or self.url.split(b"?")[0] != b"/backup"
                              or len(self.body) > MAX_BODY_BYTES):
            method = b"\0body"  # answered with 413 below
        self.done.append((method, self.url, self.parser.should_keep_alive(), bytes(self.body),
                          self.authorization))


class AdminServer:
    """Serves /health and /metrics until :meth:`stop`."""

    def __init__(self, host: str, port: int, health: HealthFn, faces: FacesFn,
                 backup: BackupFn | None = None, tokens: list[str] | None = None,
                 protected_mode: bool = True) -> None:
        self.host = host
        self.port = port
        self._health = health
        self._faces = faces
        self._backup = backup
        # Bearer tokens POST /backup accepts (the operator secrets); none: no check.
        self._tokens = [t.encode() for t in tokens or () if t]
        # without tokens, POST /backup from this host only (security/protected.py)
        self._local_only = protected_mode and not self._tokens
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def start(self) -> None:
        """Bind and start accepting. :raises OSError: when the port cannot be bound."""
        self._server = await asyncio.start_server(self._connection, self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting and close open connections. Idempotent."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        self._server = None

    def respond(self, method: bytes, url: bytes) -> tuple[int, str, bytes]:
        """Route one request to (status, content type, body)."""
        try:
            path = httptools.parse_url(url).path
        except httptools.HttpParserInvalidURLError:
            return 400, "text/plain", b"bad request target\n"
        if method == b"\0body":
            return 413, "text/plain", b"only POST /backup takes a body (a small JSON one)\n"
        if path == b"/backup":
            return 405, "text/plain", b"only POST is allowed\n"
        if path not in (b"/health", b"/metrics"):
            return 404, "text/plain", b"not found: try /health or /metrics\n"
        if method != b"GET":
            return 405, "text/plain", b"only GET is allowed\n"
        if path == b"/health":
            status, doc = self._health()
            return status, "application/json", json.dumps(doc, default=str).encode() + b"\n"
        text = REGISTRY.render() + process_metrics(self._faces())
        return 200, METRICS_CONTENT_TYPE, text.encode()

    def _authorized(self, authorization: bytes) -> bool:
        if not self._tokens:
            return True
        scheme, _, given = authorization.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        given = given.strip()
        # Every token is compared (no early exit), each in constant time.
        return sum(hmac.compare_digest(given, t) for t in self._tokens) > 0

    async def _run_backup(self, payload: bytes, authorization: bytes,
                          local: bool) -> tuple[int, str, bytes]:
        if self._local_only and not local:
            return 403, "application/json", json.dumps({
                "error": "tuffdb is running in protected mode: with neither --api-key nor "
                         "--requirepass set, POST /backup is taken from this host only; set "
                         f"one (then send it as a Bearer token), or turn protected mode off: "
                         f"{OFF}"}).encode() + b"\n"
        if not self._authorized(authorization):
            return 401, "application/json", json.dumps({
                "error": "POST /backup needs Authorization: Bearer <the server's --api-key "
                         "or --requirepass>"}).encode() + b"\n"
        if self._backup is None:
            return 404, "text/plain", b"this server cannot take backups\n"
        status, doc = await self._backup(payload)
        return status, "application/json", json.dumps(doc, default=str).encode() + b"\n"

    @staticmethod
    def _head(status: int, ctype: str, length: int, keep_alive: bool) -> bytes:
        allow = ("Allow: GET\r\n" if status == 405 else
                 'WWW-Authenticate: Bearer realm="tuffdb admin"\r\n' if status == 401 else "")
        conn = "keep-alive" if keep_alive else "close"
        return (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {length}\r\n{allow}Connection: {conn}\r\n"
                "Cache-Control: no-store\r\n\r\n").encode("latin-1")

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError):
            pass  # client went away or idled out: nothing to answer
        except Exception:
            log.exception("admin connection failed")
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = _Request()
        pending = 0  # bytes of the request not yet completed
        local = is_local(peer_host(writer.get_extra_info("peername")))
        while True:
            data = await asyncio.wait_for(reader.read(READ_SIZE), IDLE_TIMEOUT_S)
            if not data:
                return
            pending += len(data)
            try:
                req.parser.feed_data(data)
            except httptools.HttpParserError:
                req.done.append((b"\0bad", b"", False, b"", b""))
            keep_alive = True
            for method, url, client_keep_alive, payload, authorization in req.done:
                if method == b"\0bad":
                    status, ctype, body = 400, "text/plain", b"malformed HTTP request\n"
                elif method == b"POST" and url.split(b"?")[0] == b"/backup":
                    status, ctype, body = await self._run_backup(payload, authorization,
                                                                 local)
                else:
                    status, ctype, body = self.respond(method, url)
                keep_alive = client_keep_alive and status not in (400, 413)
                writer.write(self._head(status, ctype, len(body), keep_alive) + body)
                if not keep_alive:
                    break
            if req.done:
                pending = 0
                req.done.clear()
            elif pending > MAX_HEAD_BYTES + (MAX_BODY_BYTES if req.has_body else 0):
                status = 413 if req.has_body else 431
                body = b"request too large\n"
                writer.write(self._head(status, "text/plain", len(body), keep_alive=False) + body)
                keep_alive = False
            await writer.drain()
            if not keep_alive:
                return
