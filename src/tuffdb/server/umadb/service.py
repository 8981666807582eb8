"""The ``umadb.v1.DCB`` service: the handlers our HTTP/2 gRPC server calls.

Handlers take and return raw bytes: requests are parsed with the protobuf C parser and
read responses are joined from stored entry bytes, on the loop thread. The appends that
arrive in one loop pass are committed together at its end, on the loop thread (one drain,
one fsync; see ``DCBService._commit_pass``). The face that binds this to a port and to
``tuffdb serve`` is ``server/umadb/server.py``.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from tuffdb.errors import AuthError, CorruptionError, ProgrammingError
from tuffdb.security.protected import OFF
from tuffdb.events.store import EventStore
from tuffdb.events.subscription import next_positions
from tuffdb.events.writer import Settled
from tuffdb.server.umadb.grpc_h2 import (
    STREAM,
    UNARY,
    WAIT,
    Call,
    GrpcError,
    Method,
    StatusCode,
)
from tuffdb.server.umadb import health_v1_pb2 as hpb
from tuffdb.events import umadb_v1_pb2 as pb
from tuffdb.server.umadb import wire

# A cluster leader keeps at most this many passes' rounds waiting for their followers'
# confirmation: appends arriving meanwhile gather into the next pass, committed when the
# round in flight is confirmed (or refused), or LINGER_S after the first of them arrived,
# whichever comes first (DCBService._commit_pass).
ROUNDS_IN_FLIGHT = 1
LINGER_S = 0.005

# A client from another host while no API key is set (security/protected.py).
PROTECTED = ("tuffdb is running in protected mode: with no API key set, the gRPC face "
             "accepts clients from this host only; set one (tuffdb serve --api-key, clients "
             f"then send it), or turn protected mode off: {OFF}")

SERVICE = "umadb.v1.DCB"
LEGACY_SERVICE = "umadb.UmaDBService"
HEALTH_SERVICE = "grpc.health.v1.Health"
GRACE_SECONDS = 5.0


def on_error(exc: BaseException) -> tuple[int, str, tuple[tuple[bytes, bytes], ...]]:
    """A handler's exception as a gRPC status with the ErrorResponse detail trailer."""
    code, etype, msg = wire.classify(exc)
    return code, msg, ((b"grpc-status-details-bin", wire.error_details(etype, msg)),)


class Parked:
    """Streams waiting for something (a commit, a health change) on the loop thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls: set[Call] = set()
        self.live = 0  # streams that may park: while > 0, every commit wakes the loop

    def park(self, call: Call) -> Any:
        self.calls.add(call)
        return WAIT

    def wake(self) -> None:
        calls = [c for c in self.calls if not c.done]
        self.calls.clear()
        for call in calls:
            call.pump()

    def wake_threadsafe(self, _head: int = 0) -> None:
        if self.live:
            self.loop.call_soon_threadsafe(self.wake)


class DCBService:
    """The five RPCs, raw bytes in and out, on the loop thread."""

    def __init__(
        self, store: EventStore, loop: asyncio.AbstractEventLoop, api_key: str | None = None,
        node: Any = None, protected_mode: bool = True,
    ) -> None:
        self.store = store
        self.loop = loop
        # A cluster node (tuffdb serve --cluster): a follower forwards appends to the
        # leader; a leader commits them on the writer thread, which waits for followers.
        self.node = node
        self._bearer = f"Bearer {api_key}".encode() if api_key else None
        # without an API key, clients from this host only (security/protected.py)
        self._local_only = protected_mode and api_key is None
        self._stopping = False
        self._pass: list[tuple[Call, Future[int] | Settled]] = []
        self._commit_soon = False  # _commit_pass is scheduled
        self._in_flight = 0  # passes committed whose last append awaits followers
        self._linger: asyncio.TimerHandle | None = None
        self.linger_s = LINGER_S
        self.parked = Parked(loop)
        store.add_listener(self.parked.wake_threadsafe)

    def close(self) -> None:
        self._stopping = True
        self.store.remove_listener(self.parked.wake_threadsafe)
        self.parked.wake()

    def _auth(self, call: Call) -> None:
        if self._local_only and not call.conn.local:
            raise AuthError(PROTECTED)
        # Compared in constant time: a byte-by-byte != would let a caller time its way
        # through the key.
        if self._bearer is not None and not hmac.compare_digest(
                call.header(b"authorization") or b"", self._bearer):
            raise AuthError("missing or invalid API key")

    # -- unary RPCs ----------------------------------------------------------------------
    def append(self, call: Call, raw: bytes) -> None:
        self._auth(call)
        node = self.node
        if node is not None and not node.is_leader():
            self._forward_append(call, raw, node)
            return
        req = pb.AppendRequest.FromString(raw)
        tails, types, tags, uuids, tracking = wire.encode_append(req, raw)
        items = None
        after = None
        if req.HasField("condition"):
            c = req.condition
            after = c.after if c.HasField("after") else 0
            if c.HasField("fail_if_events_match"):
                items = wire.items_from_pb(c.fail_if_events_match)
        fut = self.store.submit_encoded(
            tails, types, tags, uuids, tracking=tracking, items=items, after=after,
            defer=True,
        )
        if fut.done():  # nothing to write (an empty append)
            self._settle(call, fut)
            return
        self._pass.append((call, fut))
        if self._commit_soon:
            return
        if self._in_flight < ROUNDS_IN_FLIGHT:
            self._commit_soon = True
            self.loop.call_soon(self._commit_pass)
        elif self._linger is None:
            self._linger = self.loop.call_later(self.linger_s, self._commit_pass)

    def _forward_append(self, call: Call, raw: bytes, node: Any) -> None:
        """A cluster follower passes the append on to the leader and answers with the
        leader's reply, exactly (once this node applied it: the writer reads it here)."""
        loop = self.loop
        forwarded = loop.run_in_executor(None, node.forward, "events.append", {}, raw)

        def relay(f: asyncio.Future[tuple[dict[str, Any], bytes]]) -> None:
            exc = f.exception()
            if exc is not None:
                call.fail(exc)
                return
            fields, reply = f.result()
            code = int(fields.get("code", 13))
            if code == 0:
                call.reply(reply)
                return
            message = str(fields.get("message", "forwarded append failed"))
            etype = int(fields.get("etype", pb.ErrorResponse.ErrorType.IO))
            call.fail(GrpcError(StatusCode(code), message, (
                (b"grpc-status-details-bin", wire.error_details(etype, message)),)))

        forwarded.add_done_callback(relay)

    def _commit_pass(self) -> None:
        """End of a loop pass: commit its appends here, one fsync, then answer them.

        Like the RESP face's loop rounds: every append that arrived in one pass of the
        loop shares one drain and one fsync, run on the loop thread (no hand-off to the
        writer thread and back). Measured against handing each append to the writer
        thread (bench/events.py, alternating runs): b64 x 16 198k-202k vs 122k-148k
        events/s, b512 x 16 257k-271k vs 249k-262k, b1 x 64 within its run-to-run spread.
        The cost: reads wait while a commit runs. ``commit_deferred`` settles every
        request, with its error if the commit failed (``Writer.commit_now``).

        On a cluster leader a round is answered once its followers confirm it, and every
        round costs both nodes the same fixed work (write, fsync, ship; the follower's
        apply, fsync, acked-file write and acknowledgement). While ``ROUNDS_IN_FLIGHT``
        rounds wait, the appends that arrive gather instead of going out in rounds of
        their own: the next pass is committed when the round in flight is settled, or
        ``LINGER_S`` after the first of them, so a follower that stalls delays them by at
        most that. Measured on sync1 clusters (the replication bench's events load,
        64-event appends, one build with and without, alternating): 16 writers 9 pairs,
        medians 113.6k -> 125.8k events/s (7 pairs up) with less CPU an event on both
        nodes; 4 writers 78.5k/78.9k -> 83.7k/85.2k; 2 writers 60.1k/62.4k ->
        56.3k/61.9k (a round rarely waits there).
        """
        self._commit_soon = False
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        done, self._pass = self._pass, []
        if not done:
            return
        self.store.commit_deferred()
        last = next((f for _, f in reversed(done) if not f.done()), None)
        for call, fut in done:
            if fut.done():
                self._settle(call, fut)
            elif fut is last:
                # A cluster leader: written and fsynced; answered once followers confirm
                # (on the confirmer thread), while this loop serves on, gathering the
                # next pass until then (ROUNDS_IN_FLIGHT): the last append of the round
                # is confirmed last, so its confirmation frees the window.
                self._in_flight += 1
                fut.on_done(functools.partial(  # type: ignore[union-attr]
                    self._confirmed_threadsafe, call, fut, [False]))
            else:
                fut.on_done(functools.partial(self._settle_threadsafe, call, fut))  # type: ignore[union-attr]

    def _confirmed_threadsafe(self, call: Call, fut: Future[int] | Settled,
                              once: list[bool]) -> None:
        self.loop.call_soon_threadsafe(self._confirmed, call, fut, once)

    def _confirmed(self, call: Call, fut: Future[int] | Settled, once: list[bool]) -> None:
        """The last append of a round in flight is settled (confirmed or refused): answer
        it, and commit the appends gathered meanwhile. ``once``: ``on_done`` may call
        back twice (it says so); the window is freed once."""
        self._settle(call, fut)
        if once[0]:
            return
        once[0] = True
        self._in_flight -= 1
        if self._pass and not self._commit_soon and self._in_flight < ROUNDS_IN_FLIGHT:
            self._commit_pass()

    def _settle_threadsafe(self, call: Call, fut: Future[int] | Settled) -> None:
        self.loop.call_soon_threadsafe(self._settle, call, fut)

    @staticmethod
    def _settle(call: Call, fut: Future[int] | Settled) -> None:
        exc = fut.exception()
        if exc is not None:
            call.fail(exc)
        else:
            call.reply(wire.head_message(fut.result()))

    def head(self, call: Call, raw: bytes) -> bytes:
        self._auth(call)
        pb.HeadRequest.FromString(raw)
        return wire.head_message(self.store.head())

    def tracking(self, call: Call, raw: bytes) -> bytes:
        self._auth(call)
        req = pb.TrackingRequest.FromString(raw)
        return wire.head_message(self.store.get_tracking_info(req.source))

    # -- streams -------------------------------------------------------------------------
    def _batches(self, pos: np.ndarray, batch: int) -> Iterator[tuple[np.ndarray, bytes]]:
        """Joined entry bytes per message: at most ``batch`` events and the byte cap."""
        store = self.store
        lens = store._len.array
        cap = wire.MAX_RESPONSE_BYTES
        for i in range(0, len(pos), batch):
            chunk = pos[i : i + batch]
            sizes = lens[chunk - 1]
            if int(sizes.sum()) <= cap:
                yield chunk, store.join_entries(chunk)
                continue
            ends = np.cumsum(sizes)
            j = 0
            while j < len(chunk):
                k = int(np.searchsorted(ends, ends[j] - sizes[j] + cap, "right"))
                k = max(k, j + 1)  # a single event above the cap still goes out alone
                yield chunk[j:k], store.join_entries(chunk[j:k])
                j = k

    def read(self, call: Call, raw: bytes) -> Iterator[bytes]:
        # Checked before the stream starts, so a bad request gets a trailers-only status.
        self._auth(call)
        req = pb.ReadRequest.FromString(raw)
        if req.HasField("subscribe") and req.subscribe:
            raise ProgrammingError(
                "the subscribe argument of Read is deprecated: call Subscribe instead"
            )
        query = wire.query_from_pb(req.query) if req.HasField("query") else None
        start = req.start if req.HasField("start") else None
        limit = req.limit if req.HasField("limit") else None
        batch = req.batch_size if req.HasField("batch_size") else wire.DEFAULT_BATCH
        batch = min(max(batch, 1), wire.MAX_BATCH)
        if limit == 0:
            return iter(())
        pos, head = self.store.plan(query, start, req.backwards, limit)
        if not len(pos):
            return iter((wire.read_message(b"", (head or None) if limit is None else None),))
        if len(pos) <= batch and limit is not None:  # the common small read: one message
            return iter((wire.read_message(self.store.join_entries(pos), int(pos[-1])),))
        return self._read_messages(pos, batch, head if limit is None else None)

    def _read_messages(self, pos: np.ndarray, batch: int, head: int | None) -> Iterator[bytes]:
        try:
            for chunk, body in self._batches(pos, batch):
                yield wire.read_message(body, head if head is not None else int(chunk[-1]))
        except Exception as exc:
            raise CorruptionError(f"read failed: {exc}") from exc

    def subscribe(self, call: Call, raw: bytes) -> Iterator[bytes]:
        call.send_headers()  # early headers: the client's subscribe() returns at once
        self._auth(call)
        req = pb.SubscribeRequest.FromString(raw)
        items = wire.items_from_pb(req.query) if req.HasField("query") else None
        cursor = req.after if req.HasField("after") else 0
        batch = req.batch_size if req.HasField("batch_size") else wire.DEFAULT_BATCH
        batch = min(max(batch, 1), wire.MAX_BATCH)
        return self._subscription(call, items, cursor, batch)

    def _subscription(
        self, call: Call, items: Any, cursor: int, batch: int
    ) -> Iterator[bytes]:
        if cursor >= wire.U64_MAX:
            return
        store = self.store
        parked = self.parked
        parked.live += 1
        try:
            while not (self._stopping or store.closed):
                pos, cursor = next_positions(store, items, cursor, batch)
                if len(pos):
                    for _chunk, body in self._batches(pos, batch):
                        yield body
                    continue
                yield parked.park(call)
        finally:
            parked.live -= 1


def append_now(store: EventStore, raw: bytes) -> int:
    """Commit one serialized AppendRequest and wait for it (a thread other than the loop)."""
    return submit_append(store, raw).result()


def submit_append(store: EventStore, raw: bytes) -> Future[int]:
    """Queue one serialized AppendRequest for the store's writer thread."""
    req = pb.AppendRequest.FromString(raw)
    tails, types, tags, uuids, tracking = wire.encode_append(req, raw)
    items = None
    after = None
    if req.HasField("condition"):
        c = req.condition
        after = c.after if c.HasField("after") else 0
        if c.HasField("fail_if_events_match"):
            items = wire.items_from_pb(c.fail_if_events_match)
    fut = store.submit_encoded(tails, types, tags, uuids, tracking=tracking, items=items,
                               after=after)
    assert isinstance(fut, Future)  # not deferred: the writer thread's future
    return fut


class HealthService:
    """``grpc.health.v1.Health``: "" and ``umadb.v1.DCB``; not behind the API key."""

    SERVICES = ("", SERVICE)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status: int = hpb.HealthCheckResponse.SERVING
        self.parked = Parked(loop)

    def set(self, status: int) -> None:
        """On the loop thread."""
        self.status = status
        self.parked.wake()

    def _response(self, service: str) -> bytes:
        if service not in self.SERVICES:
            status: int = hpb.HealthCheckResponse.SERVICE_UNKNOWN
        else:
            status = self.status
        response = hpb.HealthCheckResponse(status=status)  # type: ignore[arg-type]
        result: bytes = response.SerializeToString()
        return result

    def check(self, _call: Call, raw: bytes) -> bytes:
        req = hpb.HealthCheckRequest.FromString(raw)
        if req.service not in self.SERVICES:
            raise GrpcError(StatusCode.NOT_FOUND, "unknown service")
        return self._response(req.service)

    def watch(self, call: Call, raw: bytes) -> Iterator[bytes]:
        req = hpb.HealthCheckRequest.FromString(raw)
        return self._watch(call, req.service)

    def _watch(self, call: Call, service: str) -> Iterator[bytes]:
        last = None
        while True:
            status = self.status if service in self.SERVICES else None
            if status != last:
                last = status
                yield self._response(service)
            if last == hpb.HealthCheckResponse.NOT_SERVING:
                return  # shutting down: end the stream so the server need not wait for it
            yield self.parked.park(call)


def methods(svc: DCBService, health: HealthService) -> dict[str, Method]:
    dcb = {
        "Read": Method(STREAM, svc.read),
        "Subscribe": Method(STREAM, svc.subscribe),
        "Append": Method(UNARY, svc.append),
        "Head": Method(UNARY, svc.head),
        "GetTrackingInfo": Method(UNARY, svc.tracking),
    }
    out = {f"/{SERVICE}/{k}": v for k, v in dcb.items()}
    out.update({f"/{LEGACY_SERVICE}/{k}": dcb[k] for k in ("Read", "Append", "Head")})
    out[f"/{HEALTH_SERVICE}/Check"] = Method(UNARY, health.check)
    out[f"/{HEALTH_SERVICE}/Watch"] = Method(STREAM, health.watch)
    return out
