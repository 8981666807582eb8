"""A gRPC server over HTTP/2 on an asyncio loop (uvloop where available).

Serves unary and server-streaming methods whose handlers take and return raw message
bytes, over cleartext HTTP/2 (h2c, prior knowledge, as gRPC clients speak it) or TLS with
ALPN ``h2``. Everything runs on the loop thread: a frame is parsed, its call dispatched and
the reply written within one ``data_received``, and all replies produced by one read go
out in one ``write``. No thread hand-off, no task and no coroutine per call.

Why not grpcio's server: measured on the 2-core machine, its Python layer cost about
200 us of CPU per call (three completion-queue events per unary call, two thread
hand-offs), which capped small calls near 5k/s whatever the handler did
(docs/benchmarks/events.md). This module does what the ``umadb`` client (tonic/h2) and
grpc-core clients need of HTTP/2 (RFC 9113) and nothing more:

* **Frames**: DATA, HEADERS + CONTINUATION (padding and priority fields skipped),
  SETTINGS, PING (answered at once: clients keep connections alive with pings), WINDOW_UPDATE,
  RST_STREAM (cancels the call), GOAWAY; PRIORITY and unknown types ignored; PUSH_PROMISE
  and framing errors end the connection with GOAWAY.
* **Flow control** both ways. Receiving: a 16 MiB stream window (requests are capped far
  below) and a connection window topped up as data arrives. Sending: each stream's and the
  connection's window are honoured; what does not fit waits in the stream's queue until a
  WINDOW_UPDATE, and a streaming handler is not asked for its next message until its queue
  is empty and the transport is not paused (bounded memory per slow client).
* **Back-pressure**: when a client stops reading, its transport pauses and the server
  stops reading its requests until it drains. Request bodies are capped per call
  (``max_message``) and per connection (:data:`MAX_BUFFERED` across unfinished calls).
* **gRPC**: length-prefixed messages (compression refused), ``grpc-status`` /
  ``grpc-message`` (percent-encoded) trailers, trailers-only error replies, ``-bin``
  metadata base64-encoded, ``grpc-timeout`` deadlines, early response headers on request.

Handlers (see :class:`Method`):

* unary: ``fn(call, message) -> bytes | None``; ``None`` means the handler will settle
  the call later with :meth:`Call.reply` / :meth:`Call.fail` (from the loop thread).
* server-streaming: ``fn(call, message) -> Iterator[bytes]``; the iterator may yield
  :data:`WAIT` to park until :meth:`Call.pump` is called again (by whoever it waits for).

An exception from a handler becomes the status that ``on_error(exc)`` gives.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import struct
from collections import deque
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import TYPE_CHECKING, Any, cast

from tuffdb.security.protected import is_local, peer_host
from tuffdb.server.umadb import hpack_codec

if TYPE_CHECKING:
    import os
    import ssl

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types (RFC 9113 section 6).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
# Flags.
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# Error codes.
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR = 6, 7, 8, 9

_FH = struct.Struct(">IBI")  # (length << 8 | type, flags, stream id): the 9-byte header
_PFX = struct.Struct(">BI")  # gRPC message prefix: compressed flag, length
_U32 = struct.Struct(">I")
_SETTING = struct.Struct(">HI")
_GOAWAY = struct.Struct(">II")

MAX_WINDOW = (1 << 31) - 1
DEFAULT_WINDOW = 65_535
STREAM_WINDOW = 16 << 20  # what we grant each request stream
CONN_WINDOW = 1 << 30  # what we grant the connection, topped up past half
MAX_FRAME = 1 << 20  # largest frame we accept (SETTINGS_MAX_FRAME_SIZE)
MAX_STREAMS = 1024
MAX_HEADER_BLOCK = 64 << 10
MAX_BUFFERED = 64 << 20  # request bytes one connection may hold in unfinished calls
WRITE_HIGH_WATER = 4 << 20

_OUR_SETTINGS = b"".join(
    _SETTING.pack(k, v)
    for k, v in ((3, MAX_STREAMS), (4, STREAM_WINDOW), (5, MAX_FRAME), (6, MAX_HEADER_BLOCK))
)


class StatusCode(IntEnum):
    """gRPC status codes (names as in every gRPC implementation)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class GrpcError(Exception):
    """Raised by a handler to end its call with ``code`` and ``message`` (and trailers)."""

    def __init__(
        self, code: StatusCode, message: str, trailers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.trailers = trailers


Status = tuple[int, str, tuple[tuple[bytes, bytes], ...]]
OnError = Callable[[BaseException], Status]
WAIT: Any = object()  # yielded by a streaming handler: park until Call.pump()

UNARY, STREAM = 0, 1


class Method:
    """A registered method: ``kind`` is :data:`UNARY` or :data:`STREAM`."""

    __slots__ = ("fn", "kind")

    def __init__(self, kind: int, fn: Callable[..., Any]) -> None:
        self.kind = kind
        self.fn = fn


# -- header blocks we send -------------------------------------------------------------------
_RESP_FIELDS = ((b":status", b"200"), (b"content-type", b"application/grpc"))
_RESP_BLOCK = hpack_codec.encode(_RESP_FIELDS)
_OK_BLOCK = hpack_codec.encode(((b"grpc-status", b"0"),))
_RESP_HEADERS = _FH.pack(len(_RESP_BLOCK) << 8 | HEADERS, END_HEADERS, 0)[:5]
_OK_HEADERS = _FH.pack(len(_OK_BLOCK) << 8 | HEADERS, END_STREAM | END_HEADERS, 0)[:5]
_SID = _U32.pack
_MAX_MESSAGE_TEXT = 4096


def percent_encode(message: str) -> bytes:
    """``grpc-message`` encoding: bytes outside printable ASCII, and ``%``, as %XX."""
    raw = message.encode("utf-8", "replace")[:_MAX_MESSAGE_TEXT]
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return raw
    return b"".join(
        bytes([b]) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in raw
    )


def status_block(
    code: int, message: str, trailers: tuple[tuple[bytes, bytes], ...] = ()
) -> list[tuple[bytes, bytes]]:
    """Trailer fields: status, message, then ``trailers`` (``-bin`` ones base64, unpadded)."""
    fields = [(b"grpc-status", str(int(code)).encode())]
    if message:
        fields.append((b"grpc-message", percent_encode(message)))
    fields += [
        (name, base64.b64encode(value).rstrip(b"=") if name.endswith(b"-bin") else value)
        for name, value in trailers
    ]
    return fields


def parse_timeout(value: bytes) -> float | None:
    """``grpc-timeout`` (1-8 digits and a unit) in seconds; None when malformed."""
    units = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = units.get(value[-1:])
    return None if unit is None else int(value[:-1]) * unit


# -- one call (one HTTP/2 stream) -------------------------------------------------------------
class Call:
    """One gRPC call: its request headers and body, its reply state and send queue."""

    __slots__ = (
        "chunks", "conn", "done", "headers", "headers_sent", "it", "method", "nbody", "out",
        "remote_closed", "send_window", "sid", "timer",
    )

    def __init__(self, conn: H2Connection, sid: int, headers: hpack_codec.Headers) -> None:
        self.conn = conn
        self.sid = sid
        self.headers = headers
        self.method: Method | None = None
        self.chunks: list[bytes] = []
        self.nbody = 0
        self.send_window = conn.peer_window
        self.out: deque[Any] = deque()  # memoryviews of DATA payload, then a trailer block
        self.headers_sent = False
        self.remote_closed = False
        self.done = False
        self.it: Iterator[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def header(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    # -- replies ----------------------------------------------------------------------------
    def reply(self, message: bytes) -> None:
        """A unary call's reply: headers, the message and the OK status in one write."""
        if self.done:
            return
        conn = self.conn
        n = len(message) + 5
        if (
            not self.out and not self.headers_sent and n <= conn.send_window
            and n <= self.send_window and n <= conn.peer_max_frame
        ):
            sid = _SID(self.sid)
            conn.send_window -= n
            self.send_window -= n
            conn.write(b"".join((
                _RESP_HEADERS, sid, _RESP_BLOCK,
                _U32.pack(n << 8 | DATA), b"\x00", sid, _PFX.pack(0, n - 5), message,
                _OK_HEADERS, sid, _OK_BLOCK,
            )))
            self.done = True
            conn.closed(self)
            return
        self.send(message)
        self.finish(0, "")

    def fail(self, exc: BaseException) -> None:
        code, message, trailers = (
            (exc.code, exc.message, exc.trailers) if isinstance(exc, GrpcError)
            else self.conn.server.on_error(exc)
        )
        self.finish(code, message, trailers)

    def send_headers(self) -> None:
        """Send the response headers now (a stream that may not answer for a while)."""
        if not self.headers_sent and not self.done:
            self.headers_sent = True
            self.conn.write(_RESP_HEADERS + _SID(self.sid) + _RESP_BLOCK)

    def send(self, message: bytes) -> None:
        """Queue one message; written at once as far as the flow-control windows allow."""
        if self.done:
            return
        parts: list[bytes | memoryview] = []
        if not self.headers_sent:
            self.headers_sent = True
            parts += (_RESP_HEADERS, _SID(self.sid), _RESP_BLOCK)
        data = _PFX.pack(0, len(message)) + message
        if self.out:
            self.out.append(memoryview(data))
        else:
            rest = self._frames(memoryview(data), parts)
            if rest is not None:
                self.out.append(rest)
                self.conn.stalled[self.sid] = self
        if parts:
            self.conn.write(b"".join(parts))

    def _frames(self, data: memoryview, parts: list[bytes | memoryview]) -> memoryview | None:
        """DATA frames for as much of ``data`` as the windows allow; returns the rest."""
        conn = self.conn
        sid = _SID(self.sid)
        size = conn.peer_max_frame
        while data:
            room = min(conn.send_window, self.send_window, size, len(data))
            if room <= 0:
                return data
            parts += (_U32.pack(room << 8 | DATA), b"\x00", sid, data[:room])
            conn.send_window -= room
            self.send_window -= room
            data = data[room:]
        return None

    def finish(
        self, code: int, message: str, trailers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        """End the call with a status (trailers-only when nothing was sent yet)."""
        if self.done:
            return
        self.done = True
        self._close_it()
        if not code and not message and not trailers:
            block = _OK_BLOCK
        else:
            block = hpack_codec.encode(status_block(code, message, trailers))
        if not self.headers_sent:
            self.headers_sent = True
            if not self.out:  # trailers-only
                block = _RESP_BLOCK + block
            else:
                self.conn.write(_RESP_HEADERS + _SID(self.sid) + _RESP_BLOCK)
        if self.out:
            self.out.append(block)  # sent once the queued data is out
            return
        self.conn.write(self.conn.header_frames(self.sid, block, END_STREAM))
        self.conn.closed(self)

    # -- streaming ----------------------------------------------------------------------------
    def pump(self) -> None:
        """Pull messages from a streaming handler while the client can take them."""
        conn = self.conn
        while not self.done and not self.out and not conn.paused:
            it = self.it
            if it is None:
                return
            try:
                message = next(it)
            except StopIteration:
                self.it = None
                self.finish(0, "")
                return
            except Exception as exc:  # noqa: BLE001 (becomes the call's status)
                self.it = None
                self.fail(exc)
                return
            if message is WAIT:
                return
            self.send(message)
        if not self.done and (self.out or conn.paused):
            conn.stalled[self.sid] = self

    def _drain(self) -> bool:
        """Send queued data as the windows now allow; True when the queue is empty."""
        out = self.out
        conn = self.conn
        parts: list[bytes | memoryview] = []
        while out:
            item = out.popleft()
            if isinstance(item, bytes):  # the trailer block, after the last data
                parts.append(conn.header_frames(self.sid, item, END_STREAM))
                conn.write(b"".join(parts))
                conn.closed(self)
                return True
            rest = self._frames(item, parts)
            if rest is not None:
                out.appendleft(rest)
                break
        if parts:
            conn.write(b"".join(parts))
        return not out

    def cancel(self) -> None:
        """The client reset the stream or the connection went away."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.done = True
        self.out.clear()
        self._close_it()

    def _close_it(self) -> None:
        """Close a streaming handler's generator (its ``finally`` runs now)."""
        if self.it is not None:
            it, self.it = self.it, None
            close = getattr(it, "close", None)
            if close is not None:
                close()


# -- one connection ---------------------------------------------------------------------------
class H2Connection(asyncio.Protocol):
    def __init__(self, server: GrpcServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.decoder = hpack_codec.Decoder()
        self.calls: dict[int, Call] = {}
        self.stalled: dict[int, Call] = {}
        self.last_sid = 0
        self.send_window = DEFAULT_WINDOW
        self.peer_window = DEFAULT_WINDOW
        self.peer_max_frame = 16_384
        self.recv_unacked = 0
        self.buffered = 0  # request bytes held by calls not yet dispatched
        self.paused = False
        self.closing = False
        self.goaway_sent = False
        self._preface = True
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._need = len(PREFACE)
        self._cont: tuple[int, int, list[bytes]] | None = None
        self._wbuf: list[bytes] | None = None
        self.local = True  # the peer is on this host (security/protected.py)

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.local = is_local(peer_host(transport.get_extra_info("peername")))
        transport.set_write_buffer_limits(WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        self.server.connections.add(self)
        self.write(
            _FH.pack(len(_OUR_SETTINGS) << 8 | SETTINGS, 0, 0) + _OUR_SETTINGS
            + _FH.pack(4 << 8 | WINDOW_UPDATE, 0, 0) + _U32.pack(CONN_WINDOW - DEFAULT_WINDOW)
        )

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (Protocol API)
        self.closing = True
        self.server.connections.discard(self)
        for call in list(self.calls.values()):
            self._forget(call)
            call.cancel()

    def pause_writing(self) -> None:
        self.paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.closing:
            self.transport.resume_reading()
        self._unstall()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        if self._pending:
            self._pending.append(data)
            self._pending_len += len(data)
            if self._pending_len < self._need:
                return
            data = b"".join(self._pending)
            self._pending = []
        self._wbuf = []
        try:
            off = self._frames(data)
        except hpack_codec.HPACKError as exc:
            self.connection_error(COMPRESSION_ERROR, str(exc))
            off = len(data)
        except Exception as bug:  # noqa: BLE001 (a bug must not take the server down)
            self.connection_error(INTERNAL_ERROR, f"internal error: {bug}")
            off = len(data)
        wbuf, self._wbuf = self._wbuf, None
        if wbuf and self.transport is not None:
            self.transport.write(b"".join(wbuf) if len(wbuf) > 1 else wbuf[0])
        if off < len(data) and not self.closing:
            rest = data[off:]
            self._pending = [rest]
            self._pending_len = len(rest)

    # -- writing ------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._wbuf is not None:
            self._wbuf.append(data)
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def header_frames(self, sid: int, block: bytes, flags: int) -> bytes:
        """HEADERS (+ CONTINUATION) frames carrying ``block``."""
        size = self.peer_max_frame
        if len(block) <= size:
            return _FH.pack(len(block) << 8 | HEADERS, flags | END_HEADERS, sid) + block
        parts = [_FH.pack(size << 8 | HEADERS, flags, sid), block[:size]]
        rest = block[size:]
        while rest:
            piece, rest = rest[:size], rest[size:]
            parts += (_FH.pack(len(piece) << 8 | CONTINUATION, 0 if rest else END_HEADERS, sid),
                      piece)
        return b"".join(parts)

    def _drop_body(self, call: Call) -> None:
        self.buffered -= call.nbody
        call.nbody = 0
        call.chunks = []

    def _forget(self, call: Call) -> bool:
        """Drop ``call`` from the connection's books; False if it was already gone."""
        if self.calls.pop(call.sid, None) is None:
            return False
        self.stalled.pop(call.sid, None)
        self._drop_body(call)
        self.server.call_ended()
        return True

    def closed(self, call: Call) -> None:
        """``call`` sent its END_STREAM: forget it (and stop an unfinished request)."""
        if not self._forget(call):
            return
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        if not call.remote_closed:
            self.write(_FH.pack(4 << 8 | RST_STREAM, 0, call.sid) + _U32.pack(NO_ERROR))

    def connection_error(self, code: int, message: str) -> None:
        if self.closing:
            return
        self.closing = True
        debug = message.encode("utf-8", "replace")[:1024]
        frame = _FH.pack((8 + len(debug)) << 8 | GOAWAY, 0, 0) + _GOAWAY.pack(self.last_sid, code)
        self.write(frame + debug)
        wbuf, self._wbuf = self._wbuf, None
        if self.transport is not None:
            if wbuf:
                self.transport.write(b"".join(wbuf))
            self.transport.close()

    def goaway(self) -> None:
        """Graceful shutdown: no new calls; the ones in flight finish."""
        if self.goaway_sent or self.closing:
            return
        self.goaway_sent = True
        self.write(_FH.pack(8 << 8 | GOAWAY, 0, 0) + _GOAWAY.pack(self.last_sid, NO_ERROR))

    def _unstall(self) -> None:
        while self.stalled and not self.paused and not self.closing:
            progressed = False
            for sid, call in list(self.stalled.items()):
                if call.out and not call._drain():
                    continue
                if self.stalled.get(sid) is call:
                    del self.stalled[sid]
                progressed = True
                if call.it is not None and not call.done:
                    call.pump()
            if not progressed:
                return

    # -- reading ------------------------------------------------------------------------------
    def _frames(self, data: bytes) -> int:  # noqa: C901, PLR0912 (one branch per frame type)
        off = 0
        n = len(data)
        if self._preface:
            if n < len(PREFACE):
                self._need = len(PREFACE)
                return 0
            if data[: len(PREFACE)] != PREFACE:
                self.connection_error(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                return n
            self._preface = False
            off = len(PREFACE)
        while not self.closing:
            if n - off < 9:
                self._need = 9
                return off
            lt, flags, sid = _FH.unpack_from(data, off)
            length = lt >> 8
            if length > MAX_FRAME:
                self.connection_error(FRAME_SIZE_ERROR, f"frame of {length} bytes")
                return n
            end = off + 9 + length
            if end > n:
                self._need = 9 + length
                return off
            ftype = lt & 0xFF
            sid &= 0x7FFFFFFF
            payload = data[off + 9 : end]
            off = end
            if self._cont is not None:
                self._continuation(ftype, flags, sid, payload)
            elif ftype == HEADERS:
                self._headers(flags, sid, payload)
            elif ftype == DATA:
                self._data(flags, sid, payload)
            elif ftype == WINDOW_UPDATE:
                self._window_update(sid, payload)
            elif ftype == PING:
                self._ping(flags, sid, payload)
            elif ftype == SETTINGS:
                self._settings(flags, sid, payload)
            elif ftype == RST_STREAM:
                self._rst(sid, payload)
            elif ftype == GOAWAY:
                pass  # the client is leaving; its calls in flight still finish
            elif ftype in (PUSH_PROMISE, CONTINUATION):
                self.connection_error(PROTOCOL_ERROR, f"unexpected frame type {ftype}")
            # PRIORITY and unknown frame types are ignored (RFC 9113 section 5.5)
        return n

    def _strip(self, flags: int, payload: bytes) -> bytes | None:
        if not flags & PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            self.connection_error(PROTOCOL_ERROR, "bad padding")
            return None
        return payload[1 : len(payload) - payload[0]]

    def _headers(self, flags: int, sid: int, payload: bytes) -> None:
        block = self._strip(flags, payload)
        if block is None:
            return
        if flags & PRIORITY_FLAG:
            block = block[5:]
        if not sid:
            self.connection_error(PROTOCOL_ERROR, "HEADERS on stream 0")
            return
        if not flags & END_HEADERS:
            self._cont = (sid, flags, [block])
            return
        self._header_block(sid, flags, block)

    def _continuation(self, ftype: int, flags: int, sid: int, payload: bytes) -> None:
        assert self._cont is not None
        csid, cflags, parts = self._cont
        if ftype != CONTINUATION or sid != csid:
            self.connection_error(PROTOCOL_ERROR, "expected CONTINUATION")
            return
        parts.append(payload)
        if sum(map(len, parts)) > MAX_HEADER_BLOCK:
            self.connection_error(PROTOCOL_ERROR, "header block too large")
            return
        if flags & END_HEADERS:
            self._cont = None
            self._header_block(csid, cflags, b"".join(parts))

    def _header_block(self, sid: int, flags: int, block: bytes) -> None:  # noqa: C901, PLR0912
        headers = self.decoder.decode(block)  # always: the table must follow the client
        call = self.calls.get(sid)
        if call is not None:  # trailers from the client
            if flags & END_STREAM:
                call.remote_closed = True
                self._dispatch(call)
            return
        if not sid & 1:
            self.connection_error(PROTOCOL_ERROR, f"bad stream id {sid}")
            return
        if sid <= self.last_sid:
            return  # a closed stream's late trailers
        self.last_sid = sid
        server = self.server
        if self.goaway_sent or len(self.calls) >= MAX_STREAMS:
            self.write(_FH.pack(4 << 8 | RST_STREAM, 0, sid) + _U32.pack(REFUSED_STREAM))
            return
        call = Call(self, sid, headers)
        self.calls[sid] = call
        server.call_started()
        if flags & END_STREAM:
            call.remote_closed = True
        path = method = ctype = timeout = None
        for k, v in headers:
            if k == b":path":
                path = v
            elif k == b":method":
                method = v
            elif k == b"content-type":
                ctype = v
            elif k == b"grpc-timeout":
                timeout = v
        if method != b"POST" or ctype is None or not ctype.startswith(b"application/grpc"):
            status = b"405" if method != b"POST" else b"415"
            block = hpack_codec.encode(((b":status", status),))
            call.done = True
            self.write(self.header_frames(sid, block, END_STREAM))
            self.closed(call)
            return
        m = server.methods.get(path) if path is not None else None
        if m is None:
            call.finish(StatusCode.UNIMPLEMENTED, f"unknown method {path!r}")
            return
        call.method = m  # a grpc-encoding is fine until a message says it is compressed
        if timeout is not None:
            secs = parse_timeout(timeout)
            if secs is not None:
                call.timer = asyncio.get_running_loop().call_later(
                    secs, call.finish, StatusCode.DEADLINE_EXCEEDED, "deadline exceeded"
                )
        if call.remote_closed:
            self._dispatch(call)

    def _data(self, flags: int, sid: int, payload: bytes) -> None:
        self.recv_unacked += len(payload)
        if self.recv_unacked >= CONN_WINDOW // 2:
            self.write(_FH.pack(4 << 8 | WINDOW_UPDATE, 0, 0) + _U32.pack(self.recv_unacked))
            self.recv_unacked = 0
        call = self.calls.get(sid)
        if call is None:
            if not sid or sid > self.last_sid:
                self.connection_error(PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            return  # a finished call's leftover data
        body = self._strip(flags, payload)
        if body is None or call.remote_closed:
            return
        if body:
            call.chunks.append(body)
            call.nbody += len(body)
            self.buffered += len(body)
            if call.nbody > self.server.max_message + 5:
                self._drop_body(call)
                call.finish(
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"request message larger than {self.server.max_message} bytes",
                )
                return
            if self.buffered > MAX_BUFFERED:  # many unfinished calls: bound the memory
                self._drop_body(call)
                call.finish(
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"over {MAX_BUFFERED} bytes of unfinished requests on this connection",
                )
                return
        if flags & END_STREAM:
            call.remote_closed = True
            self._dispatch(call)

    def _dispatch(self, call: Call) -> None:
        if call.done or call.method is None:
            return  # already answered (unknown method, oversized request, deadline)
        chunks = call.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._drop_body(call)
        if len(body) < 5:
            call.finish(StatusCode.INTERNAL, "missing request message")
            return
        compressed, size = _PFX.unpack_from(body)
        if compressed:
            call.finish(StatusCode.UNIMPLEMENTED, "compressed messages are not supported")
            return
        if size != len(body) - 5:
            call.finish(StatusCode.INTERNAL, "expected exactly one request message")
            return
        message = body[5:]
        m = call.method
        try:
            result = m.fn(call, message)
        except Exception as exc:  # noqa: BLE001 (becomes the call's status)
            call.fail(exc)
            return
        if m.kind == UNARY:
            if result is not None:
                call.reply(result)
        else:
            call.it = result
            call.pump()

    def _window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            self.connection_error(FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
            return
        inc = _U32.unpack(payload)[0] & 0x7FFFFFFF
        if not sid:
            self.send_window += inc
            if self.send_window > MAX_WINDOW:
                self.connection_error(FLOW_CONTROL_ERROR, "connection window overflow")
                return
        else:
            call = self.calls.get(sid)
            if call is None:
                return
            call.send_window += inc
        if self.stalled:
            self._unstall()

    def _ping(self, flags: int, sid: int, payload: bytes) -> None:
        if sid or len(payload) != 8:
            self.connection_error(PROTOCOL_ERROR, "bad PING")
            return
        if not flags & ACK:
            self.write(_FH.pack(8 << 8 | PING, ACK, 0) + payload)

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:  # noqa: C901
        if sid:
            self.connection_error(PROTOCOL_ERROR, "SETTINGS on a stream")
            return
        if flags & ACK:
            return
        if len(payload) % 6:
            self.connection_error(FRAME_SIZE_ERROR, "SETTINGS of the wrong size")
            return
        grew = False
        for i in range(0, len(payload), 6):
            ident, value = _SETTING.unpack_from(payload, i)
            if ident == 4:  # SETTINGS_INITIAL_WINDOW_SIZE
                if value > MAX_WINDOW:
                    self.connection_error(FLOW_CONTROL_ERROR, "initial window too large")
                    return
                delta = value - self.peer_window
                self.peer_window = value
                for call in self.calls.values():
                    call.send_window += delta
                grew = grew or delta > 0
            elif ident == 5:  # SETTINGS_MAX_FRAME_SIZE
                if not 16_384 <= value <= 16_777_215:
                    self.connection_error(PROTOCOL_ERROR, "bad max frame size")
                    return
                self.peer_max_frame = value
            # header table size: our encoder uses no table; the rest do not concern a server
        self.write(_FH.pack(SETTINGS, ACK, 0))
        if grew and self.stalled:
            self._unstall()

    def _rst(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4 or not sid:
            self.connection_error(PROTOCOL_ERROR, "bad RST_STREAM")
            return
        call = self.calls.get(sid)
        if call is not None and self._forget(call):
            call.cancel()


# -- the server -------------------------------------------------------------------------------
class GrpcServer:
    """Listens, owns the connections, and counts the calls in flight (for a graceful stop)."""

    def __init__(
        self, methods: dict[str, Method], on_error: OnError, *, max_message: int,
    ) -> None:
        self.methods = {k.encode(): v for k, v in methods.items()}
        self.on_error = on_error
        self.max_message = max_message
        self.connections: set[H2Connection] = set()
        self.calls = 0
        self._server: asyncio.AbstractServer | None = None
        self._idle: asyncio.Event | None = None

    def call_started(self) -> None:
        self.calls += 1

    def call_ended(self) -> None:
        self.calls -= 1
        if not self.calls and self._idle is not None:
            self._idle.set()

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> int:
        loop = asyncio.get_running_loop()
        self._server = srv = await loop.create_server(
            lambda: H2Connection(self), host, port, ssl=ssl_context, backlog=1024,
            reuse_address=True,
        )
        sockets = cast("Any", srv).sockets  # a list under uvloop, a tuple under asyncio
        return int(sockets[0].getsockname()[1])

    async def stop(self, grace: float) -> None:
        """GOAWAY to every connection, wait up to ``grace`` s for calls in flight, close."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.goaway()
        if self.calls:
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
        for conn in list(self.connections):
            for call in list(conn.calls.values()):
                call.finish(StatusCode.UNAVAILABLE, "server shutting down")
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            await self._server.wait_closed()


def tls_context(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> ssl.SSLContext:
    """A server context with ALPN ``h2`` from PEM files."""
    import ssl  # noqa: PLC0415

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    return ctx


__all__ = [
    "STREAM", "UNARY", "WAIT", "Call", "GrpcError", "GrpcServer", "H2Connection", "Method",
    "StatusCode", "tls_context",
]
