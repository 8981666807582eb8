"""``GET /api/subscribe/{c}[?filter_field=&filter_value=]``: Server-Sent Events (spec section 11).

The reply is ``200 text/event-stream`` with no length; the connection then belongs to the
stream. Blocks, each ended by a blank line::

    event: subscribed      data: {"collection", "subscription_id"}   (once; the watch is live)
    event: mutation        data: <MutationNotification payload JSON>
    event: heartbeat       data: {"timestamp"}                        (every HEARTBEAT_SECONDS)
    event: error           data: {"code", "message"}                  (then the stream ends)

A stream is held to what a request of its key would be allowed, before every event it
sends (:func:`live_permission`): once the key is revoked or its token expires it ends with
a 401 error block, once the key may no longer read the collection (or the filter field)
with a 403, and records leave out the fields the key may no longer read.

Events come from the embedded watch (documents/watch.py) in commit order; with
``durable_operations`` an event is sent only once its write is fsynced. A client that
does not read is cut off (error event, close) once MAX_BUFFERED events wait or the
socket's send buffer passes MAX_SEND_BUFFER_BYTES; writers never wait for it.

This module also holds the pieces the WebSocket face shares: :class:`Takeover` (a
response that takes the connection over) and :func:`pump` (watch -> async sender).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any

from tuffdb.documents.values import format_datetime
from tuffdb.documents.watch import Subscription, watch
from tuffdb.errors import ClosedError, Error, OperationalError, ProtocolError
from tuffdb.server.ekodb.proto import Response

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from tuffdb.security.auth import Permission
    from tuffdb.server.ekodb.app import App, Ctx
    from tuffdb.server.ekodb.proto import Request

LOG = logging.getLogger("tuffdb.ekodb.sse")
HEARTBEAT_SECONDS = 15.0
MAX_BUFFERED = 10_000
MAX_SEND_BUFFER_BYTES = 8 << 20


class Takeover(Response):
    """A response that owns the connection: ``takeover(protocol)`` runs until it ends."""

    __slots__ = ("takeover",)

    def __init__(self, status: int, body: bytes, content_type: str,
                 headers: list[tuple[str, str]],
                 takeover: Callable[[Any], Awaitable[None]] | None = None) -> None:
        super().__init__(status, body, content_type, headers)
        self.takeover = takeover


def new_subscription_id() -> str:
    return "sub_" + secrets.token_hex(16)


def subscribe(app: App, c: str, filter_field: str | None, filter_value: Any) -> Subscription:
    check_collection_name(c)  # a collection may be watched before its first insert
    return watch(app.db.collection(c), filter_field=filter_field, filter_value=filter_value,
                 max_buffered=MAX_BUFFERED, schema_events=True)


def live_permission(app: App, req: Request, c: str, filter_field: Any) -> Permission | None:
    """What a subscription to ``c`` opened by request ``req`` may be sent now: its
    key's read permission on ``c`` as it is now (AuthError once the key is revoked or
    the token expired, PermissionDeniedError once it may not read ``c`` or the filter
    field). A session once kept the key it connected with for as long as it lasted: a
    revoked key went on receiving every mutation."""
    key = app.reauthenticate(req)
    perm = key.require(c, "read")
    if filter_field:
        app.check_readable(perm, c, [str(filter_field)])
    return perm


def wire_event(app: App, event: dict[str, Any], perm: Permission | None) -> dict[str, Any]:
    """A watch event as the wire sends it (typed records, the key's field rules)."""
    out = {k: v for k, v in event.items() if k != "records"}
    if "records" in event:
        out["records"] = [app.out(r, perm) for r in event["records"]]
    return out


async def pump(app: App, sub: Subscription,
               send: Callable[[dict[str, Any]], Awaitable[bool]]) -> str:
    """Forward ``sub``'s events to ``send`` until it returns False; returns why it stopped.

    ``send`` returns False when the peer is gone or too far behind.
    """
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    def wake() -> None:
        loop.call_soon_threadsafe(ready.set)

    sub.notify = wake
    kv = app.db.kv
    while True:
        try:
            item = sub.poll()
        except (OperationalError, ClosedError) as exc:  # cut off, or the database closed
            return str(exc)
        if item is None:
            await ready.wait()
            ready.clear()
            continue
        event, ticket = item
        if ticket is not None and app.settings.durable_operations:
            await asyncio.wrap_future(kv.when_durable(ticket))
        if not await send(event):
            return "the client stopped reading (send buffer full); subscribe again to resume"


def ended_by(exc: Error) -> tuple[int, str]:
    """The status code and message a stream ends with when ``exc`` ends it."""
    from tuffdb.server.ekodb.app import message_of, status_of  # noqa: PLC0415 - cycle

    return status_of(exc), message_of(exc)


def _block(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _heartbeat(write: Callable[[bytes], None]) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)  # a period, not synchronisation
        now = format_datetime(dt.datetime.now(dt.UTC))
        write(_block("heartbeat", {"timestamp": now}))


def sse(app: App, ctx: Ctx, c: str) -> Any:
    perm = app.perm(ctx, c, "read")
    params = ctx.params
    if params.get("filter_field"):
        app.check_readable(perm, c, [str(params["filter_field"])])
    sub = subscribe(app, c, params.get("filter_field"), params.get("filter_value"))
    sid = new_subscription_id()

    async def run(proto: Any) -> None:
        transport = proto.transport
        if transport is None or transport.is_closing():
            sub.close()
            return
        head = ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                "Connection: close\r\n\r\n")
        transport.write(head.encode("latin-1"))
        transport.write(_block("subscribed", {"collection": c, "subscription_id": sid}))

        async def send(event: dict[str, Any]) -> bool:
            if transport.is_closing():
                return False
            if transport.get_write_buffer_size() > MAX_SEND_BUFFER_BYTES:
                return False
            now = live_permission(app, ctx.req, c, params.get("filter_field"))  # raises
            if event["event"] == "schema_changed":
                payload = {k: v for k, v in event.items() if k != "event"}
                transport.write(_block("schema_changed", payload))
            else:
                transport.write(_block("mutation", wire_event(app, event, now)))
            return True

        beat = asyncio.get_running_loop().create_task(_heartbeat(transport.write))
        try:
            try:
                code, reason = 409, await pump(app, sub, send)
            except Error as exc:  # the key was revoked, or may no longer read this
                code, reason = ended_by(exc)
            if not transport.is_closing():
                transport.write(_block("error", {"code": code, "message": reason}))
        except Exception:  # a broken stream must not pass silently
            LOG.exception("SSE stream failed")
        finally:
            beat.cancel()
            sub.close()
            with contextlib.suppress(Exception):
                transport.close()

    return Takeover(200, b"", "text/event-stream", [], run)


def check_collection_name(c: str) -> None:
    from tuffdb.documents.collection import check_name  # noqa: PLC0415

    try:
        check_name(c)
    except Exception as exc:  # noqa: BLE001 - ProgrammingError -> a 400 with the reason
        raise ProtocolError(str(exc)) from None


def register(app: App) -> None:
    app.route("GET", "/api/subscribe/{c}", sse, "read")
