"""The ``umadb.v1.DCB`` gRPC face over the embedded event store (grpcio, sync server).

Serves Read, Subscribe, Append, Head and GetTrackingInfo, the legacy
``/umadb.UmaDBService/{Read,Append,Head}`` aliases and ``grpc.health.v1.Health``.
Contract facts: ``shared/spec/umadb-grpc.md``; our deliberate divergences are listed in
``docs/design/events.md`` ("Wire divergences").

Handlers take and return raw bytes: requests are parsed with the protobuf C parser and
read responses are joined from stored entry bytes. Appends go to the store's writer
thread; grpcio's pool threads wait on their futures, never the host's event loop.

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
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn

import grpc
import numpy as np

from tuffdb.errors import AuthError, ProgrammingError
from tuffdb.events.store import EventStore
from tuffdb.events.subscription import next_positions
from tuffdb.server.protocol import health_v1_pb2 as hpb
from tuffdb.server.protocol import umadb_v1_pb2 as pb
from tuffdb.server.protocol import umadb_wire as wire
from tuffdb.server.umadb_grpc_tuning import (
    batch_scheduling,
    batch_thread,
    last_with_status,
)
from tuffdb.storage.codec import load_key

SERVICE = "umadb.v1.DCB"
LEGACY_SERVICE = "umadb.UmaDBService"
HEALTH_SERVICE = "grpc.health.v1.Health"
GRACE_SECONDS = 5.0
# Every open stream (subscriptions included) holds a pool thread while it runs.
MAX_WORKERS = 1024

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", wire.MAX_REQUEST_BYTES),
    ("grpc.max_send_message_length", wire.SEND_LIMIT),
    # The umadb client pings every 5 s; grpcio's defaults would GOAWAY it (spec 8.2).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.keepalive_time_ms", 5000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.max_concurrent_streams", 1024),
    ("grpc.so_reuseport", 0),
]


class DCBService:
    """The five RPCs, raw bytes in and out, on grpcio's synchronous server.

    Measured on the 2-core box (trivial handlers, the umadb client, 16-64 callers): the
    sync server handled 5.6k unary and 4.2k streaming calls/s against grpc.aio's 3.6k / 3.0k
    (4.0k / 3.3k on uvloop), so the face runs grpcio's own thread pool beside the host's
    loop rather than on it. Appends block their pool thread on the writer's future.
    """

    def __init__(self, store: EventStore, api_key: str | None = None) -> None:
        self.store = store
        self._bearer = f"Bearer {api_key}" if api_key else None
        self._stopping = False

    def close(self) -> None:
        self._stopping = True
        with self.store._cv:
            self.store._cv.notify_all()

    def _auth(self, context: grpc.ServicerContext) -> None:
        if self._bearer is None:
            return
        for k, v in context.invocation_metadata() or ():
            if k == "authorization" and v == self._bearer:
                return
        raise AuthError("missing or invalid API key")

    def _fail(self, context: grpc.ServicerContext, exc: BaseException) -> NoReturn:
        code, etype, msg = wire.classify(exc)
        context.set_trailing_metadata(
            (("grpc-status-details-bin", wire.error_details(etype, msg)),)
        )
        context.abort(code, msg)
        raise AssertionError("unreachable")  # abort raises

    # -- unary RPCs ----------------------------------------------------------------------
    def append(self, raw: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            self._auth(context)
            req = pb.AppendRequest.FromString(raw)
            tails, types, tags, uuids, tracking = wire.encode_append(req, raw)
            items = None
            after = None
            if req.HasField("condition"):
                c = req.condition
                after = c.after if c.HasField("after") else 0
                if c.HasField("fail_if_events_match"):
                    items = wire.items_from_pb(c.fail_if_events_match)
            pos = self.store.submit_encoded(
                tails, types, tags, uuids, tracking=tracking, items=items, after=after
            ).result()
        except Exception as exc:  # noqa: BLE001
            self._fail(context, exc)
        return wire.head_message(pos)

    def head(self, raw: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            self._auth(context)
            pb.HeadRequest.FromString(raw)
        except Exception as exc:  # noqa: BLE001
            self._fail(context, exc)
        return wire.head_message(self.store.head())

    def tracking(self, raw: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            self._auth(context)
            req = pb.TrackingRequest.FromString(raw)
        except Exception as exc:  # noqa: BLE001
            self._fail(context, exc)
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

    def read(self, raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        # No explicit early headers: a read answers at once, so its first message carries
        # them (Subscribe, which may wait, sends them up front).
        try:
            self._auth(context)
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
                return
            pos, head = self.store.plan(query, start, req.backwards, limit)
        except Exception as exc:  # noqa: BLE001
            self._fail(context, exc)
        if not len(pos):
            yield wire.read_message(b"", (head or None) if limit is None else None)
            return
        try:
            for chunk, body in self._batches(pos, batch):
                yield wire.read_message(body, head if limit is None else int(chunk[-1]))
        except Exception as exc:  # noqa: BLE001
            self._fail(context, wire.CorruptionError(f"read failed: {exc}"))

    def subscribe(self, raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        context.send_initial_metadata(())
        try:
            self._auth(context)
            req = pb.SubscribeRequest.FromString(raw)
            items = wire.items_from_pb(req.query) if req.HasField("query") else None
            cursor = req.after if req.HasField("after") else 0
            batch = req.batch_size if req.HasField("batch_size") else wire.DEFAULT_BATCH
            batch = min(max(batch, 1), wire.MAX_BATCH)
        except Exception as exc:  # noqa: BLE001
            self._fail(context, exc)
        if cursor >= wire.U64_MAX:
            return
        store = self.store
        cv = store._cv
        done = [False]

        def on_done() -> None:
            done[0] = True
            with cv:
                cv.notify_all()

        context.add_callback(on_done)
        while not (done[0] or self._stopping or store.closed):
            pos, cursor = next_positions(store, items, cursor, batch)
            if len(pos):
                for _chunk, body in self._batches(pos, batch):
                    yield body
                continue
            with cv:
                cv.wait_for(
                    lambda c=cursor: store._head > c or done[0] or self._stopping or store.closed
                )


class HealthService:
    """``grpc.health.v1.Health``: "" and ``umadb.v1.DCB``; not behind the API key."""

    SERVICES = ("", SERVICE)

    def __init__(self) -> None:
        self.status = hpb.HealthCheckResponse.SERVING
        self._cv = threading.Condition()

    def set(self, status: int) -> None:
        with self._cv:
            self.status = status
            self._cv.notify_all()

    def _response(self, service: str) -> hpb.HealthCheckResponse:
        if service not in self.SERVICES:
            return hpb.HealthCheckResponse(status=hpb.HealthCheckResponse.SERVICE_UNKNOWN)
        return hpb.HealthCheckResponse(status=self.status)

    def check(
        self, req: hpb.HealthCheckRequest, context: grpc.ServicerContext
    ) -> hpb.HealthCheckResponse:
        if req.service not in self.SERVICES:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return self._response(req.service)

    def watch(
        self, req: hpb.HealthCheckRequest, context: grpc.ServicerContext
    ) -> Iterator[hpb.HealthCheckResponse]:
        done = [False]

        def on_done() -> None:
            done[0] = True
            with self._cv:
                self._cv.notify_all()

        context.add_callback(on_done)
        last = None
        while not done[0]:
            resp = self._response(req.service)
            if resp.status != last:
                last = resp.status
                yield resp
            if last == hpb.HealthCheckResponse.NOT_SERVING:
                return  # shutting down: end the stream so the server need not wait for it
            with self._cv:
                self._cv.wait_for(lambda last=last: done[0] or self.status != last)


def _handlers(svc: DCBService, health: HealthService) -> list[grpc.GenericRpcHandler]:
    uu = grpc.unary_unary_rpc_method_handler
    us = grpc.unary_stream_rpc_method_handler
    dcb = {
        "Read": last_with_status(svc.read),
        "Subscribe": us(svc.subscribe),
        "Append": uu(svc.append),
        "Head": uu(svc.head),
        "GetTrackingInfo": uu(svc.tracking),
    }
    legacy = {k: dcb[k] for k in ("Read", "Append", "Head")}
    hreq = hpb.HealthCheckRequest.FromString
    hresp = hpb.HealthCheckResponse.SerializeToString
    hs = {
        "Check": uu(health.check, request_deserializer=hreq, response_serializer=hresp),
        "Watch": us(health.watch, request_deserializer=hreq, response_serializer=hresp),
    }
    return [
        grpc.method_handlers_generic_handler(SERVICE, dcb),
        grpc.method_handlers_generic_handler(LEGACY_SERVICE, legacy),
        grpc.method_handlers_generic_handler(HEALTH_SERVICE, hs),
    ]


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
        self._server: grpc.Server | None = None
        self._svc: DCBService | None = None
        self._health: HealthService | None = None
        self._stopped = False

    async def start(self) -> None:
        self._svc = DCBService(self.store, self.api_key)
        self._health = HealthService()
        # Per-call cost cuts, measured: see umadb_grpc_tuning.py.
        writer = self.store._writer  # noqa: SLF001
        if writer.native_id is not None:
            batch_thread(writer.native_id)
        with batch_scheduling():  # grpcio's poller and pool threads start in here
            server = grpc.server(
                futures.ThreadPoolExecutor(
                    max_workers=MAX_WORKERS, thread_name_prefix="umadb-grpc"
                ),
                options=SERVER_OPTIONS,
            )
            server.add_generic_rpc_handlers(_handlers(self._svc, self._health))
            addr = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            if self.tls:
                cert, key = (Path(p).read_bytes() for p in self.tls)
                creds = grpc.ssl_server_credentials([(key, cert)])
                self.bound_port = server.add_secure_port(addr, creds)
            else:
                self.bound_port = server.add_insecure_port(addr)
            if not self.bound_port:
                raise OSError(f"could not bind gRPC port {addr}")
            server.start()
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
            server = self._server
            await asyncio.to_thread(lambda: server.stop(GRACE_SECONDS).wait())
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
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()


__all__ = ["DCBService", "UmaDBFace", "create", "main"]
