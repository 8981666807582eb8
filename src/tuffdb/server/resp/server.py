"""Server-wide state of the RESP face and the Face object the host drives.

:class:`RespServer` owns the store, the settings CONFIG GET/SET see, the connected
clients, the pub/sub hub, the WATCH registry and the SCAN cursor table. Everything
runs on one asyncio loop, so none of it needs a lock; the store's own background
threads (flusher, spill) sit behind its API.

Durability maps Redis's words to the engine's (``appendfsync`` -> ``durability``):
``always`` -> ``"always"``, ``everysec`` -> ``"interval"`` with ``interval_ms <= 1000``,
``no`` -> ``"none"``. Writes are always issued with ``sync=False``; under ``always`` the
connection waits on ``store.when_durable(store.write_ticket())`` once per batch before
replying, so concurrent batches share fsyncs and the loop never blocks on one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import ssl
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.conn import Conn
from tuffdb.server.resp.pubsub import Hub

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore

log = logging.getLogger("tuffdb.resp")

TO_ENGINE = {"always": "always", "everysec": "interval", "no": "none"}
TO_REDIS = {v: k for k, v in TO_ENGINE.items()}
MAX_EVERYSEC_INTERVAL_MS = 1000
SCAN_CURSORS_MAX = 100_000
REDIS_COMPAT_VERSION = "7.0.0"  # the Redis behaviour we follow (HELLO/INFO "version")
# Redis serves every key from memory; the same workload here should hit the block cache
# rather than decompress a cold block per GET, so the server's default is generous.
DEFAULT_CACHE_MB = 512
SWITCH_INTERVAL_S = 0.001
DEFAULT_OUTPUT_LIMITS = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"


def open_store(config: Any, durability: str, interval_ms: int) -> KVStore:
    # Imported late: the host imports every face module, and may not need this one.
    from tuffdb.kv.store import KVStore  # noqa: PLC0415

    key = None
    if getattr(config, "encryption_key_file", None) is not None:
        from tuffdb.server.config import encryption_key  # noqa: PLC0415  (see above)

        key = encryption_key(config)
    return KVStore.open(Path(config.data_dir) / "kv", durability=durability,
                        interval_ms=interval_ms, encryption_key=key,
                        cache_bytes=int(getattr(config, "cache_mb", DEFAULT_CACHE_MB)) << 20)


class RespServer:
    """State shared by every RESP connection."""

    def __init__(self, config: Any) -> None:
        resp_extra = dict((getattr(config, "extra", None) or {}).get("resp", {}))
        durability = str(getattr(config, "durability", "interval"))
        if "appendfsync" in resp_extra:
            durability = TO_ENGINE[str(resp_extra["appendfsync"])]
        interval_ms = int(getattr(config, "interval_ms", 200))
        if durability == "interval":
            interval_ms = min(interval_ms, MAX_EVERYSEC_INTERVAL_MS)
        self.interval_ms = interval_ms
        self.host = str(getattr(config, "host", "127.0.0.1"))
        self.port = int(getattr(config, "resp_port", 6379))
        cert, key = getattr(config, "tls_cert", None), getattr(config, "tls_key", None)
        self.tls = (Path(cert), Path(key)) if cert and key else None
        self.data_dir = Path(config.data_dir)
        self.store: KVStore = open_store(config, durability, interval_ms)
        self.always = durability == "always"
        self.requirepass: str | None = getattr(config, "requirepass", None) or None
        self.maxclients = int(resp_extra.get("maxclients", getattr(config, "maxclients", 10000)))
        self.max_bulk_len = int(resp_extra.get("proto-max-bulk-len", 512 * 1024 * 1024))
        self.timeout = int(resp_extra.get("timeout", 0))
        self.output_limits = str(resp_extra.get("client-output-buffer-limit",
                                                DEFAULT_OUTPUT_LIMITS))
        self.normal_hard_limit, self.pubsub_hard_limit = hard_limits(self.output_limits)
        self.clients: dict[int, Conn] = {}
        self.next_id = itertools.count(1)
        self.hub = Hub()
        self.watchers: dict[bytes, set[Conn]] = {}
        self.cursors: dict[int, bytes] = {}
        self.next_cursor = itertools.count(1)
        self.started = time.time()
        self.last_save = int(self.started)
        self.stats = {"connections": 0, "commands": 0, "hits": 0, "misses": 0,
                      "rejected": 0, "expired": 0}
        self.degraded: str | None = None
        self.run_id = os.urandom(20).hex()
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._stopped = False
        self._round: list[Callable[[BaseException | None], None]] = []
        self.key_count_cache: tuple[float, int, int] | None = None  # INFO keyspace

    # -- durability -----------------------------------------------------------------
    @property
    def appendfsync(self) -> str:
        return TO_REDIS.get(str(self.store.durability), "everysec")

    def set_appendfsync(self, mode: str) -> None:
        engine = TO_ENGINE[mode]
        if engine == "interval":
            self.store.set_durability(engine, interval_ms=self.interval_ms)
        else:
            self.store.set_durability(engine)
        self.always = engine == "always"

    def after_round(self, fn: Callable[[BaseException | None], None]) -> None:
        """Call ``fn(error)`` once every write made so far is fsynced (``appendfsync always``).

        Like Redis's fsync in ``beforeSleep``: the batches of one loop pass join one
        group-commit *round*, run once the pass's I/O callbacks are done. The loop thread
        writes and fsyncs the round itself (:meth:`KVStore.wait_durable`) and then
        releases every waiter in order. Handing the fsync to a thread so the loop could
        serve others meanwhile measured slower here: the thread wake-ups and GIL
        hand-offs cost more CPU per round than the fsync wait they hide. ``error`` is the
        failure that poisoned the store, if any (nothing in the round is acknowledged).
        """
        if not self._round:
            asyncio.get_running_loop().call_soon(self._finish_round)
        self._round.append(fn)

    def after_writes_seen(self, fn: Callable[[BaseException | None], None]) -> bool:
        """For a batch that only read: join this pass's round if writes are waiting for
        it, so no reply shows a write a crash could still lose. False when everything
        written is already durable (rounds finish within the pass that wrote)."""
        if not self._round:
            return False
        self._round.append(fn)
        return True

    def durable_future(self) -> asyncio.Future[None]:
        """:meth:`after_round` as a future, to wait for alongside other futures."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(exc: BaseException | None) -> None:
            if fut.done():
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        self.after_round(done)
        return fut

    def _finish_round(self) -> None:
        waiters, self._round = self._round, []
        error: BaseException | None = None
        try:
            self.store.wait_durable(self.store.write_ticket())
        except Exception as exc:  # noqa: BLE001  (a closed or poisoned store: tell waiters)
            error = exc
        for fn in waiters:
            fn(error)

    # -- WATCH ----------------------------------------------------------------------
    def touch(self, key: bytes) -> None:
        """Mark connections watching ``key`` dirty (call on every write to ``key``)."""
        conns = self.watchers.get(key)
        if conns:
            for c in conns:
                c.dirty = True

    def touch_existing(self) -> None:
        """Before FLUSHDB: mark watchers of keys that exist (Redis ignores absent ones)."""
        exists = self.store.exists
        for key, conns in self.watchers.items():
            if exists(key):
                for c in conns:
                    c.dirty = True

    # -- SCAN cursors ---------------------------------------------------------------
    def save_cursor(self, last_key: bytes) -> int:
        cursors = self.cursors
        if len(cursors) >= SCAN_CURSORS_MAX:
            # Oldest first (dicts keep insertion order). A forgotten cursor restarts the
            # scan, which keeps SCAN's guarantee (duplicates allowed, nothing missed).
            for old in list(itertools.islice(cursors, SCAN_CURSORS_MAX // 10)):
                del cursors[old]
        cursor = next(self.next_cursor)
        cursors[cursor] = last_key
        return cursor

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            # Each always-round fsyncs on the loop thread with the GIL released; the KV
            # background thread (spill, merges) may take the GIL meanwhile and, CPU-bound,
            # keep it for a whole switch interval before the loop gets it back. 1 ms
            # instead of CPython's 5 ms: always SET at -P 1 +8% in a same-run A/B, no
            # change at -P 16 (process-wide: every face in the process shares it).
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        context = None
        if self.tls is not None:  # the same port speaks TLS only (like Redis's tls-port)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls)
        self._server = await loop.create_server(
            lambda: Conn(self), self.host, self.port, reuse_address=True, backlog=511,
            ssl=context,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._sweeper = loop.call_later(1.0, self._sweep)

    def _sweep(self) -> None:
        """Once a second: close clients idle longer than ``timeout`` (pub/sub excepted)."""
        if self.timeout > 0:
            limit = time.monotonic() - self.timeout
            for c in list(self.clients.values()):
                if c.last_active < limit and not c.subscribed and not c.waiting:
                    c.close_now()
        self._sweeper = asyncio.get_running_loop().call_later(1.0, self._sweep)

    async def stop(self, grace_s: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        deadline = time.monotonic() + grace_s
        for c in list(self.clients.values()):
            await c.drain_and_close(deadline)
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await loop.run_in_executor(None, self.store.close)

    def health(self) -> dict[str, Any]:
        return {
            "status": "degraded" if self.degraded else "ok",
            "face": "resp",
            "port": self.port,
            "clients": len(self.clients),
            "appendfsync": self.appendfsync,
            "tls": self.tls is not None,
            **({"reason": self.degraded} if self.degraded else {}),
        }


def hard_limits(spec: str) -> tuple[int, int]:
    parts = spec.split()
    normal = pubsub = 0
    for i in range(0, len(parts) - 3, 4):
        cls, hard = parts[i], _size(parts[i + 1])
        if cls == "normal":
            normal = hard
        elif cls == "pubsub":
            pubsub = hard
    return normal, pubsub


def _size(text: str) -> int:
    units = {"k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
    low = text.lower()
    for suffix in ("kb", "mb", "gb", "k", "m", "g"):
        if low.endswith(suffix):
            return int(low[: -len(suffix)]) * units[suffix]
    return int(low)
