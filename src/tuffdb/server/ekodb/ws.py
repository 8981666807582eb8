"""``GET /api/ws``: the ekoDB WebSocket protocol (spec section 10) on the REST face's port.

The upgrade request goes through the REST app (Bearer auth, rate limit) and is answered
with a :class:`~tuffdb.server.ekodb.sse.Takeover`; frames are parsed and built by the
``websockets`` sans-I/O :class:`ServerProtocol` (we feed it bytes, it answers pings and
close frames). Then:

1. The first client frame may be ``Hello{formats}``: the server answers at once with
   ``Welcome{format}`` (``msgpack`` when offered, else ``json``); with msgpack every later
   frame both ways is a binary MessagePack map, else JSON text. A first frame that is not
   Hello is handled as a request in JSON.
2. Requests ``{"type", "messageId", "payload"}`` run one at a time, in order, through the
   same handlers as REST (permissions, validation, transactions are theirs); replies are
   ``Success{messageId, payload: {data}}`` or ``Error`` with ``code`` and ``message`` at
   top level. With ``durable_operations`` a write is answered once fsynced, and a read
   once every write it may show is (App.visible).
3. ``Subscribe{collection, filter_field?, filter_value?}`` starts a watch (one per
   collection per connection; subscribing again replaces it) whose events are pushed as
   ``MutationNotification``; ``Unsubscribe{collection}`` stops it. A subscription that
   falls behind is dropped with an Error frame naming the reason.
4. A ping every HEARTBEAT_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import urllib.parse
from typing import TYPE_CHECKING, Any

import msgspec
from websockets.frames import CloseCode, Opcode
from websockets.http11 import Request as WsRequest
from websockets.server import ServerProtocol

from tuffdb.errors import (AuthError, Error, NotFoundError, PermissionDeniedError,
                           ProtocolError)
from tuffdb.server.ekodb import data
from tuffdb.server.ekodb import sse
from tuffdb.server.ekodb import wire as ew
from tuffdb.server.ekodb.proto import Request
from tuffdb.server.ekodb.search import run_search

if TYPE_CHECKING:
    from tuffdb.documents.watch import Subscription
    from tuffdb.security.auth import ApiKey
    from tuffdb.server.ekodb.app import App, Ctx

LOG = logging.getLogger("tuffdb.ekodb.ws")
HEARTBEAT_SECONDS = 15.0
MAX_MESSAGE_BYTES = 32 << 20
WRITES = {"Insert", "Update", "Delete", "BatchInsert", "BatchUpdate", "BatchDelete",
          "UpdateWithAction", "CreateCollection", "DeleteCollection"}


class Relayed(Exception):  # noqa: N818 - not an error of ours: the leader's answer
    """A write a follower forwarded, answered by the leader with ``code`` (not 2xx)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def write_request(kind: str, c: str, p: dict[str, Any]
                  ) -> tuple[str, str, Any, tuple[str, ...]]:
    """The REST request a WebSocket write is: (method, path, JSON body or None, the
    handler's arguments after the collection). How a follower forwards it to the leader,
    and the body the local handler gets."""
    q = functools.partial(urllib.parse.quote, safe="")
    rid = str(p.get("id"))
    if kind == "Insert":
        return "POST", f"/api/insert/{q(c)}", p.get("record"), ()
    if kind == "Update":
        return "PUT", f"/api/update/{q(c)}/{q(rid)}", p.get("record"), (rid,)
    if kind == "Delete":
        return "DELETE", f"/api/delete/{q(c)}/{q(rid)}", None, (rid,)
    if kind == "BatchInsert":
        return ("POST", f"/api/batch/insert/{q(c)}",
                {"inserts": [{"data": r} for r in p.get("records") or []]}, ())
    if kind == "BatchUpdate":
        return ("PUT", f"/api/batch/update/{q(c)}",
                {"updates": [{"id": i, "data": d} for i, d in p.get("updates") or []]}, ())
    if kind == "BatchDelete":
        return ("DELETE", f"/api/batch/delete/{q(c)}",
                {"deletes": [{"id": i} for i in p.get("ids") or []]}, ())
    if kind == "UpdateWithAction":
        action = str(p.get("action"))
        return ("PUT", f"/api/update/{q(c)}/{q(rid)}/action/{q(action)}",
                {"field": p.get("field"), "value": p.get("value")}, (rid, action))
    if kind == "CreateCollection":
        return "POST", f"/api/collections/{q(c)}", p.get("schema") or {"fields": {}}, ()
    if kind == "DeleteCollection":
        return "DELETE", f"/api/collections/{q(c)}", None, ()
    raise ProtocolError(f"unknown message type {kind!r}")


LOCAL_WRITES: dict[str, Any] = {
    "Insert": data.insert, "Update": data.update, "Delete": data.delete,
    "BatchInsert": data.batch_insert, "BatchUpdate": data.batch_update,
    "BatchDelete": data.batch_delete, "UpdateWithAction": data.action,
    "CreateCollection": data.create_collection, "DeleteCollection": data.delete_collection}


class WsSession:
    def __init__(self, app: App, key: ApiKey | None, req: Request, proto: Any) -> None:
        self.app, self.key, self.req, self.proto = app, key, req, proto
        self.transport = proto.transport
        self.ws = ServerProtocol(max_size=MAX_MESSAGE_BYTES)
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.msgpack = False
        self.subs: dict[str, tuple[Subscription, str, asyncio.Task[None]]] = {}

    # --- bytes in / out ------------------------------------------------------------------
    def flush(self) -> None:
        for chunk in self.ws.data_to_send():
            if chunk and not self.transport.is_closing():
                self.transport.write(chunk)
        if self.ws.close_expected() and not self.transport.is_closing():
            self.transport.close()

    def on_bytes(self, chunk: bytes | None) -> None:
        if chunk is None:
            self.inbox.put_nowait(None)
            return
        self.ws.receive_data(chunk)
        for event in self.ws.events_received():
            self.inbox.put_nowait(event)
        self.flush()

    def send(self, obj: dict[str, Any]) -> None:
        if self.msgpack:
            self.ws.send_binary(ew.encode(obj, True))
        else:
            self.ws.send_text(ew.encode(obj, False))
        self.flush()

    # --- the session -----------------------------------------------------------------------
    async def run(self) -> None:
        # The handshake was parsed by httptools; replay it so the sans-I/O parser moves on
        # to frames (it insists on reading the request itself).
        head = f"GET {self.req.url.decode('latin-1')} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in self.req.headers.items()) + "\r\n"
        self.ws.receive_data(head.encode("latin-1"))
        request = next((e for e in self.ws.events_received() if isinstance(e, WsRequest)), None)
        if request is None:
            self.transport.close()
            return
        response = self.ws.accept(request)
        self.ws.send_response(response)
        self.flush()
        if response.status_code != 101 or self.proto.upgraded is None:
            self.transport.close()
            return
        self.proto.raw_sink = self.on_bytes
        if self.proto.upgraded:
            self.on_bytes(bytes(self.proto.upgraded))
        beat = asyncio.get_running_loop().create_task(self._heartbeat())
        first = True
        try:
            while (frame := await self.inbox.get()) is not None:
                if frame.opcode not in (Opcode.TEXT, Opcode.BINARY):
                    continue
                msg = self._decode(frame)
                if first and isinstance(msg, dict) and msg.get("type") == "Hello":
                    formats = (msg.get("payload") or {}).get("formats") or []
                    fmt = "msgpack" if "msgpack" in formats else "json"
                    self.send({"type": "Welcome", "payload": {"format": fmt}})
                    self.msgpack = fmt == "msgpack"
                else:
                    await self.handle(msg)
                first = False
        finally:
            beat.cancel()
            for sub, _, task in self.subs.values():
                task.cancel()
                sub.close()
            with contextlib.suppress(Exception):
                self.transport.close()

    def _decode(self, frame: Any) -> Any:
        try:
            if frame.opcode is Opcode.BINARY:
                return msgspec.msgpack.decode(frame.data)
            return msgspec.json.decode(frame.data)
        except msgspec.DecodeError:
            return None

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)  # a period, not synchronisation
            self.ws.send_ping(b"")
            self.flush()

    async def handle(self, msg: Any) -> None:
        from tuffdb.server.ekodb.app import message_of, status_of  # noqa: PLC0415 - cycle

        mid = msg.get("messageId") if isinstance(msg, dict) else None
        try:
            # Each message is held to what a request of the session's key would be
            # allowed now: a revoked key's session ends here (_end), its permissions are
            # the key's current ones.
            self.key = self.app.reauthenticate(self.req)
        except AuthError as exc:
            self._end(exc, mid)
            return
        try:
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                raise ProtocolError("a message is an object {type, messageId, payload}")
            kind = msg["type"]
            payload = msg.get("payload") or {}
            if not isinstance(payload, dict):
                raise ProtocolError("payload must be an object")
            node = self.app.node
            if kind in WRITES and node is not None and not node.is_leader():
                result = await self.forward(kind, payload)  # durable per the leader
            else:
                since = self.app.opening()
                result = self.dispatch(kind, payload)
                if kind in WRITES and self.app.settings.durable_operations:
                    await self.app.durable(since)
                elif (seen := self.app.visible()) is not None:  # a read waits for what it shows
                    await seen
        except Relayed as exc:
            self.send({"type": "Error", "code": exc.code, "message": exc.message,
                       "messageId": mid})
            return
        except Error as exc:
            self.send({"type": "Error", "code": status_of(exc), "message": message_of(exc),
                       "messageId": mid})
            return
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            self.send({"type": "Error", "code": 400, "message": f"bad request: {exc}",
                       "messageId": mid})
            return
        self.send({"type": "Success", "messageId": mid, "payload": {"data": result}})

    def _ctx(self, body: Any = None) -> Ctx:
        from tuffdb.server.ekodb.app import Ctx  # noqa: PLC0415 - cycle

        raw = b"" if body is None else msgspec.json.encode(body)
        req = Request("POST", b"/api/ws", {"content-type": "application/json"}, raw)
        return Ctx(req, {}, self.key, False)

    async def forward(self, kind: str, p: dict[str, Any]) -> Any:
        """A write sent to a cluster follower: checked here as :meth:`dispatch` would,
        then sent to the leader as the REST request it is (with this session's
        credentials) and answered with the leader's answer, once this node applied
        the write (so this session reads it next, as for REST writes)."""
        app = self.app
        app._check_access(self.key, "write")  # noqa: SLF001 - the app's own access rule
        c = p.get("collection") or p.get("name")
        if not isinstance(c, str):
            raise ProtocolError(f"{kind} needs a collection")
        method, path, body, _ = write_request(kind, c, p)
        headers = {"content-type": "application/json"}
        if auth := self.req.headers.get("authorization"):
            headers["authorization"] = auth
        raw = b"" if body is None else msgspec.json.encode(body)
        node, forwarder = app.node, app.forwarder
        assert node is not None and forwarder is not None
        resp = await forwarder.forward(Request(method, path.encode(), headers, raw),
                                       node.leader_address("http"), node.read_own_write)
        try:
            answer = msgspec.json.decode(resp.body) if resp.body else None
        except msgspec.DecodeError:
            answer = resp.body.decode("utf-8", "replace")
        if 200 <= resp.status < 300:  # noqa: PLR2004
            return answer
        message = answer.get("message", answer) if isinstance(answer, dict) else answer
        raise Relayed(resp.status, str(message))

    def dispatch(self, kind: str, p: dict[str, Any]) -> Any:  # noqa: C901, PLR0911, PLR0912 - one case per message type
        app = self.app
        app._check_access(self.key, "write" if kind in WRITES else "read")  # noqa: SLF001 - the app's own access rule
        c = p.get("collection") or p.get("name")
        if kind in ("GetCollections", "ListCollections"):
            return data.list_collections(app, self._ctx())["collections"]
        if not isinstance(c, str):
            raise ProtocolError(f"{kind} needs a collection")
        if kind == "FindAll":
            return data.find(app, self._ctx({"limit": p.get("limit")}), c)
        if kind == "Query":
            body = {k: p.get(k) for k in ("filter", "sort", "limit", "skip")}
            return data.find(app, self._ctx(body), c)
        if kind == "FindById":
            return data.find_by_id(app, self._ctx(), c, str(p.get("id")))
        if kind in WRITES:
            _, _, body, args = write_request(kind, c, p)
            return LOCAL_WRITES[kind](app, self._ctx(body), c, *args)
        if kind == "TextSearch":
            perm = app.perm(self._ctx(), c, "read")
            body = {"query": p.get("query", ""), **(p.get("options") or {})}
            return run_search(app, c, body, perm)
        if kind == "DistinctValues":
            ctx = self._ctx({"filter": p.get("filter")})
            return data.distinct(app, ctx, c, str(p.get("field")))
        if kind == "Subscribe":
            return self.subscribe(c, p.get("filter_field"), p.get("filter_value"))
        if kind == "Unsubscribe":
            found = self.unsubscribe(c)
            return {"collection": c, "found": found, "unsubscribed": True}
        raise ProtocolError(f"unknown message type {kind!r}")

    def _end(self, exc: AuthError, mid: Any) -> None:
        """The session's key was revoked or its token expired: say so and close."""
        from tuffdb.server.ekodb.app import message_of  # noqa: PLC0415 - cycle

        if self.transport.is_closing():
            return
        self.send({"type": "Error", "code": 401, "message": message_of(exc), "messageId": mid})
        self.ws.send_close(CloseCode.POLICY_VIOLATION, "the API key is no longer valid")
        self.flush()
        self.transport.close()

    def subscribe(self, c: str, filter_field: str | None, filter_value: Any) -> dict[str, Any]:
        perm = self.app.perm(self._ctx(), c, "read")
        if filter_field:
            self.app.check_readable(perm, c, [str(filter_field)])
        self.unsubscribe(c)
        sub = sse.subscribe(self.app, c, filter_field, filter_value)
        sid = sse.new_subscription_id()

        async def push(event: dict[str, Any]) -> bool:
            if self.transport.is_closing():
                return False
            if self.transport.get_write_buffer_size() > sse.MAX_SEND_BUFFER_BYTES:
                return False
            now = sse.live_permission(self.app, self.req, c, filter_field)  # raises
            if event["event"] == "schema_changed":
                payload = {k: v for k, v in event.items() if k != "event"}
                self.send({"type": "SchemaChanged", "payload": payload})
                return True
            payload = {**sse.wire_event(self.app, event, now), "subscription_id": sid}
            self.send({"type": "MutationNotification", "payload": payload})
            return True

        async def run() -> None:
            try:
                code, reason = 409, await sse.pump(self.app, sub, push)
            except PermissionDeniedError as exc:  # the key may no longer read this
                code, reason = sse.ended_by(exc)
            except AuthError as exc:  # the key was revoked: the session ends
                if self.subs.get(c, (None,))[0] is sub:
                    self.subs.pop(c, None)
                    sub.close()
                self._end(exc, None)
                return
            except Error as exc:
                code, reason = sse.ended_by(exc)
            if self.subs.get(c, (None,))[0] is sub and not self.transport.is_closing():
                self.subs.pop(c, None)
                sub.close()
                self.send({"type": "Error", "code": code, "message": reason, "messageId": None})

        task = asyncio.get_running_loop().create_task(run())
        self.subs[c] = (sub, sid, task)
        return {"subscribed": True, "collection": c, "subscription_id": sid}

    def unsubscribe(self, c: str) -> bool:
        entry = self.subs.pop(c, None)
        if entry is None:
            return False
        sub, _, task = entry
        task.cancel()
        sub.close()
        return True


def ws_endpoint(app: App, ctx: Ctx) -> Any:
    key, req = ctx.key, ctx.req
    if req.headers.get("upgrade", "").lower() != "websocket":
        raise NotFoundError("GET /api/ws needs a WebSocket upgrade")

    async def run(proto: Any) -> None:
        try:
            await WsSession(app, key, req, proto).run()
        except Exception:  # a broken session must not pass silently
            LOG.exception("WebSocket session failed")
            if proto.transport is not None:
                proto.transport.close()

    return sse.Takeover(101, b"", "", [], run)


def register(app: App) -> None:
    app.route("GET", "/api/ws", ws_endpoint, "auth")
