"""The ``umadb.v1.DCB`` gRPC face over the embedded event store.

Serves Read, Subscribe, Append, Head and GetTrackingInfo, the legacy
``/umadb.UmaDBService/{Read,Append,Head}`` aliases and ``grpc.health.v1.Health`` on our own
HTTP/2 server (``server/grpc_h2.py``), on the host's event loop.
Contract facts: ``shared/spec/umadb-grpc.md``; our deliberate divergences are listed in
``docs/design/events.md`` ("Wire divergences").

Handlers take and return raw bytes: requests are parsed with the protobuf C parser and
read responses are joined from stored entry bytes, on the loop thread. The appends that
arrive in one loop pass are committed together at its end, on the loop thread (one drain,
one fsync; see ``DCBService._commit_pass``).

Run standalone (tests, benchmarks) with
``python -m tuffdb.server.umadb_grpc --port N --data-dir D``; it prints
``tuffdb umadb.v1.DCB listening on HOST:PORT`` and then ``UmaDB started`` to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from tuffdb.errors import AuthError, ProgrammingError
from tuffdb.events.store import EventStore
from tuffdb.events.subscription import next_positions
from tuffdb.events.writer import Settled
from tuffdb.server.app import loop_factory
from tuffdb.server.grpc_h2 import (
    STREAM,
    UNARY,
    WAIT,
    Call,
    GrpcError,
    GrpcServer,
    Method,
    StatusCode,
    tls_context,
)
from tuffdb.server.protocol import health_v1_pb2 as hpb
from tuffdb.server.protocol import umadb_v1_pb2 as pb
from tuffdb.server.protocol import umadb_wire as wire
from tuffdb.server.umadb_grpc_tuning import batch_thread
from tuffdb.storage.codec import load_key

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
        self, store: EventStore, loop: asyncio.AbstractEventLoop, api_key: str | None = None
    ) -> None:
        self.store = store
        self.loop = loop
        self._bearer = f"Bearer {api_key}".encode() if api_key else None
        self._stopping = False
        self._pass: list[tuple[Call, Future[int] | Settled]] = []
        self.parked = Parked(loop)
        store.add_listener(self.parked.wake_threadsafe)

    def close(self) -> None:
        self._stopping = True
        self.store.remove_listener(self.parked.wake_threadsafe)
        self.parked.wake()

    def _auth(self, call: Call) -> None:
        if self._bearer is not None and call.header(b"authorization") != self._bearer:
            raise AuthError("missing or invalid API key")

    # -- unary RPCs ----------------------------------------------------------------------
    def append(self, call: Call, raw: bytes) -> None:
        self._auth(call)
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
        if not self._pass:
            self.loop.call_soon(self._commit_pass)
        self._pass.append((call, fut))

    def _commit_pass(self) -> None:
        """End of a loop pass: commit its appends here, one fsync, then answer them.

        Like the RESP face's loop rounds: every append that arrived in one pass of the
        loop shares one drain and one fsync, run on the loop thread (no hand-off to the
        writer thread and back). Measured against handing each append to the writer
        thread (bench/events.py, alternating runs): b64 x 16 198k-202k vs 122k-148k
        events/s, b512 x 16 257k-271k vs 249k-262k, b1 x 64 within its run-to-run spread.
        The cost: reads wait while a commit runs. ``commit_deferred`` settles every
        request, with its error if the commit failed (``Writer.commit_now``).
        """
        done, self._pass = self._pass, []
        self.store.commit_deferred()
        for call, fut in done:
            self._settle(call, fut)

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
            raise wire.CorruptionError(f"read failed: {exc}") from exc

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


class HealthService:
    """``grpc.health.v1.Health``: "" and ``umadb.v1.DCB``; not behind the API key."""

    SERVICES = ("", SERVICE)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status = hpb.HealthCheckResponse.SERVING
        self.parked = Parked(loop)

    def set(self, status: int) -> None:
        """On the loop thread."""
        self.status = status
        self.parked.wake()

    def _response(self, service: str) -> bytes:
        if service not in self.SERVICES:
            status = hpb.HealthCheckResponse.SERVICE_UNKNOWN
        else:
            status = self.status
        return hpb.HealthCheckResponse(status=status).SerializeToString()

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


def _methods(svc: DCBService, health: HealthService) -> dict[str, Method]:
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


class UmaDBFace:
    """``Face`` for ``tuffdb serve`` (see server/face.py)."""

    name = "grpc"

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 50051,
        api_key: str | None = None,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.store = EventStore.open(data_dir, **(store_options or {}))
        self.host = host
        self.port = port
        self.api_key = api_key
        self.tls = (tls_cert, tls_key) if tls_cert and tls_key else None
        self.bound_port: int | None = None
        self._server: GrpcServer | None = None
        self._svc: DCBService | None = None
        self._health: HealthService | None = None
        self._stopped = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._svc = DCBService(self.store, loop, self.api_key)
        self._health = HealthService(loop)
        # The writer thread runs under SCHED_BATCH: woken by a queued append, it does not
        # preempt the loop thread while that still holds the GIL (umadb_grpc_tuning.py).
        writer = self.store._writer  # noqa: SLF001
        if writer.native_id is not None:
            batch_thread(writer.native_id)
        server = GrpcServer(
            _methods(self._svc, self._health), on_error, max_message=wire.MAX_REQUEST_BYTES
        )
        ctx = tls_context(*self.tls) if self.tls else None
        self.bound_port = await server.start(self.host, self.port, ctx)
        self._server = server

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._health is not None:
            self._health.set(hpb.HealthCheckResponse.NOT_SERVING)
        if self._svc is not None:
            self._svc.close()
        if self._server is not None:
            await self._server.stop(GRACE_SECONDS)
        await asyncio.to_thread(self.store.close)

    def health(self) -> dict[str, Any]:
        return {
            "status": "degraded" if self.store._poison else "ok",
            "port": self.bound_port,
            "head": self.store.head(),
        }


def create(config: Any) -> UmaDBFace:
    """Open ``config.data_dir / "events"`` and build the face (not started)."""
    extra = dict((getattr(config, "extra", None) or {}).get("grpc", {}))
    store_options: dict[str, Any] = {k: extra[k] for k in ("segment_bytes",) if k in extra}
    key = load_key(config.encryption_key_file)  # the file, else $TUFFDB_ENCRYPTION_KEY
    if key is not None:
        store_options["encryption_key"] = key
    return UmaDBFace(
        Path(config.data_dir) / "events",
        host=config.host,
        port=config.grpc_port,
        api_key=config.api_key or os.environ.get("TUFFDB_API_KEY") or None,
        tls_cert=config.tls_cert,
        tls_key=config.tls_key,
        store_options=store_options,
    )


# -- standalone entry point -------------------------------------------------------------
async def _serve(args: argparse.Namespace) -> None:
    face = UmaDBFace(
        Path(args.data_dir),
        host=args.host,
        port=args.port,
        api_key=args.api_key or os.environ.get("TUFFDB_API_KEY") or None,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        store_options=_store_options(args),
    )
    await face.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"tuffdb umadb.v1.DCB listening on {args.host}:{face.bound_port}", file=sys.stderr)  # noqa: T201
    print("UmaDB started (tuffdb)", file=sys.stderr, flush=True)  # noqa: T201
    await stop.wait()
    await face.stop()


def _store_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if args.segment_bytes:
        opts["segment_bytes"] = args.segment_bytes
    key = load_key(args.encryption_key_file)
    if key is not None:
        opts["encryption_key"] = key
    return opts


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tuffdb.server.umadb_grpc")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--api-key")
    p.add_argument("--tls-cert", type=Path)
    p.add_argument("--tls-key", type=Path)
    p.add_argument("--segment-bytes", type=int)
    p.add_argument("--encryption-key-file", type=Path)
    args = p.parse_args(argv)
    factory, _name = loop_factory()
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=factory) as r:
        r.run(_serve(args))


if __name__ == "__main__":
    main()


__all__ = ["DCBService", "UmaDBFace", "create", "main"]
