"""Run the RESP face alone: ``python -m tuffdb.server.resp --port 6379 --data-dir D``.

Handy for tests and benchmarks (``tuffdb serve`` runs every face). Prints
``tuffdb-resp ready host=H port=P`` to stderr once it accepts connections (with
``--port 0`` the kernel picks the port and the line says which); SIGTERM/SIGINT stop
it cleanly (the store is fsynced and closed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

from tuffdb.server.face import set_shutdown_handler
from tuffdb.server.resp import create
from tuffdb.server.resp.server import DEFAULT_CACHE_MB, TO_ENGINE


def parse_args(argv: list[str] | None = None) -> SimpleNamespace:
    p = argparse.ArgumentParser(prog="python -m tuffdb.server.resp")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--appendfsync", choices=sorted(TO_ENGINE), default="everysec")
    p.add_argument("--interval-ms", type=int, default=200)
    p.add_argument("--cache-mb", type=int, default=DEFAULT_CACHE_MB)
    p.add_argument("--requirepass", default=None)
    p.add_argument("--maxclients", type=int, default=10000)
    p.add_argument("--timeout", type=int, default=0, help="idle client timeout, seconds")
    p.add_argument("--proto-max-bulk-len", type=int, default=512 * 1024 * 1024)
    ns = p.parse_args(argv)
    return SimpleNamespace(
        data_dir=ns.data_dir, host=ns.host, resp_port=ns.port,
        durability=TO_ENGINE[ns.appendfsync], interval_ms=ns.interval_ms, cache_mb=ns.cache_mb,
        requirepass=ns.requirepass, maxclients=ns.maxclients,
        extra={"resp": {"timeout": ns.timeout, "proto-max-bulk-len": ns.proto_max_bulk_len}},
    )


async def serve(config: SimpleNamespace) -> None:
    face = create(config)
    await face.start()
    srv = face.server
    print(f"tuffdb-resp ready host={srv.host} port={srv.port}", file=sys.stderr, flush=True)  # noqa: T201
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    set_shutdown_handler(stop.set)
    await stop.wait()
    set_shutdown_handler(None)
    await face.stop()


def main(argv: list[str] | None = None) -> None:
    from tuffdb.server.app import tune_gc  # noqa: PLC0415 - as tuffdb serve runs
    from tuffdb.storage.descriptors import raise_open_file_limit  # noqa: PLC0415

    config = parse_args(argv)
    tune_gc()
    raise_open_file_limit()
    try:
        import uvloop  # noqa: PLC0415  (optional)
    except ImportError:
        asyncio.run(serve(config))
        return
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(serve(config))


if __name__ == "__main__":
    main()
