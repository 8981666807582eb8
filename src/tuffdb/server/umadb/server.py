"""The ``umadb.v1.DCB`` gRPC face over the embedded event store.

Serves Read, Subscribe, Append, Head and GetTrackingInfo, the legacy
``/umadb.UmaDBService/{Read,Append,Head}`` aliases and ``grpc.health.v1.Health`` on our own
HTTP/2 server (``server/umadb/grpc_h2.py``), on the host's event loop.
Contract facts: ``shared/spec/umadb-grpc.md``; our deliberate divergences are listed in
``docs/design/events.md`` ("Wire divergences").

The handlers are in ``server/umadb/service.py``; this module binds them to a port,
to ``tuffdb serve`` and to a standalone process.

Run standalone (tests, benchmarks) with
``python -m tuffdb.server.umadb --port N --data-dir D``; it prints
``tuffdb umadb.v1.DCB listening on HOST:PORT`` and then ``UmaDB started`` to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tuffdb.events.store import EventStore
from tuffdb.server.app import loop_factory, tune_gc
from tuffdb.server.face import cluster_node
from tuffdb.server.umadb.grpc_h2 import GrpcServer, tls_context
from tuffdb.server.umadb import health_v1_pb2 as hpb
from tuffdb.server.umadb import wire
from tuffdb.server.umadb.tuning import batch_thread
from tuffdb.server.umadb.service import (
    GRACE_SECONDS,
    DCBService,
    HealthService,
    append_now,
    methods,
    on_error,
)
from tuffdb.storage.codec import load_key


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
        protected_mode: bool = True,
    ) -> None:
        self.store = EventStore.open(data_dir, **(store_options or {}))
        self.node = cluster_node()
        if self.node is not None:
            from tuffdb.cluster.appliers import EventsApplier  # noqa: PLC0415 (in a cluster)
            from tuffdb.cluster.node import Attached  # noqa: PLC0415

            self.node.attach(Attached("events", self.store, EventsApplier(self.store)))
            self.node.forward_handlers["events.append"] = self._forwarded_append
        self.host = host
        self.port = port
        self.api_key = api_key
        self.protected_mode = protected_mode
        self.tls = (tls_cert, tls_key) if tls_cert and tls_key else None
        self.bound_port: int | None = None
        self._server: GrpcServer | None = None
        self._svc: DCBService | None = None
        self._health: HealthService | None = None
        self._stopped = False

    def _forwarded_append(self, _fields: dict[str, Any], raw: bytes) -> tuple[dict[str, Any], bytes]:
        """A follower's Append, run here (the leader) on the caller's thread."""
        try:
            pos = append_now(self.store, raw)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the client
            code, etype, message = wire.classify(exc)
            return {"code": int(code), "etype": int(etype), "message": message}, b""
        return {"code": 0}, wire.head_message(pos)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._svc = DCBService(self.store, loop, self.api_key, node=self.node,
                               protected_mode=self.protected_mode)
        self._health = HealthService(loop)
        # The writer thread runs under SCHED_BATCH: woken by a queued append, it does not
        # preempt the loop thread while that still holds the GIL (tuning.py).
        writer = self.store._writer  # noqa: SLF001
        if writer.native_id is not None:
            batch_thread(writer.native_id)
        server = GrpcServer(
            methods(self._svc, self._health), on_error, max_message=wire.MAX_REQUEST_BYTES
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

    def stores(self) -> dict[str, Any]:
        """This face's store by data subdirectory (backup and archiving read it)."""
        return {"events": self.store}

    def health(self) -> dict[str, Any]:
        return {
            "status": "degraded" if self.store.poisoned else "ok",
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
        protected_mode=config.protected_mode,
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
    p = argparse.ArgumentParser(prog="python -m tuffdb.server.umadb")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--api-key")
    p.add_argument("--tls-cert", type=Path)
    p.add_argument("--tls-key", type=Path)
    p.add_argument("--segment-bytes", type=int)
    p.add_argument("--encryption-key-file", type=Path)
    args = p.parse_args(argv)
    tune_gc()
    factory, _name = loop_factory()
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=factory) as r:
        r.run(_serve(args))



__all__ = ["DCBService", "UmaDBFace", "create", "main"]
