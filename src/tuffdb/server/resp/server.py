"""Server-wide state of the RESP face and the Face object the host drives.

:class:`RespServer` owns the store, the settings CONFIG GET/SET see, the connected
clients, the pub/sub hub, the WATCH registry and the SCAN cursor table. Everything
runs on one asyncio loop, so none of it needs a lock; the store's own background
threads (flusher, spill) sit behind its API.

Durability maps Redis's words to the engine's (``appendfsync`` -> ``durability``):
``always`` -> ``"always"``, ``everysec`` -> ``"interval"`` with ``interval_ms <= 1000``,
``no`` -> ``"none"``. Writes are always issued with ``sync=False``; under ``always`` a
batch's replies wait for its loop pass's group-commit round (``loop_rounds.py``): the
batches that arrived together share one fsync, run on the loop once they are all in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuffdb.server.face import cluster_node
from tuffdb.server.loop_rounds import LoopRounds
from tuffdb.server.resp.blocking import Blocking
from tuffdb.server.resp.conn import Conn
from tuffdb.server.resp.gather import Gatherer
from tuffdb.server.resp.keyspace import cid_of, is_collection, open_layout, stored
from tuffdb.server.resp.pubsub import Hub
from tuffdb.server.resp.scripts import Scripts
from tuffdb.server.resp.sweeper import Sweeper

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore
    from tuffdb.server.resp.pause import Pause

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
                        cache_bytes=int(getattr(config, "cache_mb", DEFAULT_CACHE_MB)) << 20,
                        tier_cache_bytes=int(getattr(config, "tier_cache_mb", 256)) << 20)


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
        try:
            self.ids = open_layout(self.store)
        except BaseException:
            self.store.close()
            raise
        self.sweeper = Sweeper(self)
        self.blocking = Blocking(self)
        self.scripts = Scripts(self)
        self.script_flags: dict[str, frozenset[str] | None] = {}  # sha -> shebang flags
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread = 0
        self.node = cluster_node()  # None unless tuffdb serve --cluster (docs/design/replication.md)
        if self.node is not None:
            from tuffdb.cluster.appliers import KVApplier  # noqa: PLC0415 (only in a cluster)
            from tuffdb.cluster.node import Attached  # noqa: PLC0415

            self.node.attach(Attached("kv", self.store, KVApplier(self.store, self.store)))
        self.always = durability == "always"
        self.requirepass: str | None = getattr(config, "requirepass", None) or None
        # without requirepass, clients from this host only (security/protected.py)
        self.protected_mode: bool = bool(getattr(config, "protected_mode", True))
        self.maxclients = int(resp_extra.get("maxclients", getattr(config, "maxclients", 10000)))
        self.max_bulk_len = int(resp_extra.get("proto-max-bulk-len", 512 * 1024 * 1024))
        self.timeout = int(resp_extra.get("timeout", 0))
        self.output_limits = str(resp_extra.get("client-output-buffer-limit",
                                                DEFAULT_OUTPUT_LIMITS))
        self.normal_hard_limit, self.pubsub_hard_limit = hard_limits(self.output_limits)
        self.clients: dict[int, Conn] = {}
        self.monitors: set[Conn] = set()  # clients that ran MONITOR (monitor.py)
        self.pause: Pause | None = None  # CLIENT PAUSE in force (pause.py)
        self.next_id = itertools.count(1)
        self.hub = Hub()
        self.pending_flush: list[Conn] = []  # connections with output to flush this pass
        self.gatherer = Gatherer(self)  # one batch per command from every client of a pass
        self.watchers: dict[bytes, set[Conn]] = {}
        self.cursors: dict[int, bytes] = {}
        self.next_cursor = itertools.count(1)
        self.started = time.time()
        self.last_save = int(self.started)
        self.stats = {"connections": 0, "commands": 0, "hits": 0, "misses": 0,
                      "rejected": 0, "expired": 0, "gathered": 0}
        self.write_error: str | None = None  # the MISCONF reply of a failed durable wait
        self.run_id = os.urandom(20).hex()
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._stopped = False
        # appendfsync always: each loop pass's batches share one fsync (loop_rounds.py)
        self.rounds = LoopRounds(self.store, threaded=self.node is not None)
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

    # -- WATCH ----------------------------------------------------------------------
    def queue_flush(self, c: Conn) -> None:
        """Flush ``c``'s output once this loop pass has handled every readable socket."""
        pending = self.pending_flush
        pending.append(c)
        if len(pending) == 1 and self.loop is not None:
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        pending = self.pending_flush
        self.pending_flush = []
        for c in pending:
            c.flush_queued = False
            c.flush()

    def flush_now(self) -> None:
        """Flush now what the pass's flush callback would (after its gathered batches)."""
        if self.pending_flush:
            self._flush()

    def gather(self, c: Conn, lname: bytes) -> bool:
        """Leave ``c``'s queue (one command with a batch form) for one batch with the other
        clients' of this pass (gather.py); False: run it now."""
        return self.gatherer.gather(c, lname, self.loop)

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
            if exists(stored(key)):
                for c in conns:
                    c.dirty = True

    # -- collections ----------------------------------------------------------------
    def dropped(self, raw: bytes) -> None:
        """A key's old value ``raw`` was deleted or overwritten by the command that just
        ran: a collection's elements are now garbage for the sweeper."""
        if is_collection(raw):
            self.sweeper.dead(cid_of(raw))

    def signal(self, key: bytes, raw: bytes) -> None:
        """``key`` now holds ``raw``: clients blocked on it may be served (after the
        current command, EXEC or script)."""
        self.blocking.signal(key, raw)

    def script_busy(self) -> bool:
        return self.scripts.owner is not None

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
        self.loop = loop
        self.loop_thread = threading.get_ident()
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
        self.sweeper.start()

    def _sweep(self) -> None:
        """Once a second: close clients idle longer than ``timeout`` (pub/sub excepted)."""
        if self.timeout > 0:
            limit = time.monotonic() - self.timeout
            for c in list(self.clients.values()):
                if c.last_active < limit and not c.subscribed and not c.waiting \
                        and c.blocked is None:
                    c.close_now()
        self._sweeper = asyncio.get_running_loop().call_later(1.0, self._sweep)

    async def stop(self, grace_s: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.stopping = True
        self.sweeper.stop()
        self.scripts.close()
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

    @property
    def degraded(self) -> str | None:
        """Why writes are refused until a restart (a failed write or fsync), or None."""
        poisoned = self.store.poisoned  # also a failed background (everysec) commit
        if self.write_error is None and poisoned is not None:
            return f"MISCONF Errors writing to the log: {poisoned}"
        return self.write_error

    def stores(self) -> dict[str, Any]:
        """This face's store by data subdirectory (backup and archiving read it)."""
        return {"kv": self.store}

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
