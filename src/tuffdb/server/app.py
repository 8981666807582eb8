"""``tuffdb serve``: one process, one asyncio loop, the admin endpoint and every face.

Lifecycle (the face side of it is in ``server/face.py``):

1. Log the effective configuration (secrets redacted), create ``data_dir``.
2. Start the admin endpoint, then each enabled face in :data:`FACE_MODULES` order:
   import its module lazily, ``create(config)``, ``await start()``, log its address.
   Any failure is fatal, a face module that cannot be imported included (every face
   exists; starting without one would hide a broken build): started faces are stopped
   and the exit code is 1. A face is left out only by setting its port to 0.
3. Log ``ready``. Tests and supervisors wait for that line.
4. On the first SIGTERM/SIGINT: ``await stop()`` on every face in reverse start
   order (each finishes in-flight work, fsyncs and closes its store), then the admin
   endpoint; log ``stopped`` and exit 0 (1 if a face failed to stop cleanly).
   A signal during start-up cancels the face being started and shuts down the same
   way. A second signal exits immediately with 128 + the signal number.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from tuffdb._version import __version__
from tuffdb.errors import Error, ProgrammingError
from tuffdb.log import configure, get_logger
from tuffdb.server.admin import AdminServer
from tuffdb.server.config import ServeConfig, cluster_secret, redacted
from tuffdb.server.face import set_shutdown_handler
from tuffdb.storage.descriptors import raise_open_file_limit

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.server.face import Face

# Face name -> module; start order is this order, stop order the reverse.
FACE_MODULES = {
    "resp": "tuffdb.server.resp",
    "grpc": "tuffdb.server.umadb",
    "http": "tuffdb.server.ekodb",
}

# Lifecycle lines (config, listening, ready, stopped, ...) are written at every
# --log-level: supervisors and tests synchronise on them.
LIFECYCLE_LOGGER = "tuffdb.lifecycle"
log = get_logger(LIFECYCLE_LOGGER)


class StartupError(Error):
    """The server could not start; the message says which part and why."""


# The cyclic collector's thresholds in a server process (CPython's default: 700, 10, 10).
# A request allocates a few dozen containers (parsed headers, dicts, closures, the
# Deferred of a durable write) that reference counting frees; at 700 a young-generation
# pass ran every dozen or so requests, promoting whatever was in flight for the older
# passes to walk again (the likely mechanism; not traced). Measured, A/B on the compiled
# build, durable tier, YCSB A/8 over HTTP (wrk, alternating fresh servers): ahead in 8 of
# 8 pairs, +2 to +27 % (docs/benchmarks/ycsb.md, 2026-12-01 evening session).
SERVER_GC_THRESHOLDS = (20_000, 50, 100)


def tune_gc() -> None:
    """Set the collector's thresholds for a long-running server process (not done by the
    embedded library: the process belongs to the application there)."""
    gc.set_threshold(*SERVER_GC_THRESHOLDS)


def loop_factory() -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    try:
        import uvloop  # noqa: PLC0415 (optional speed-up, absent on Windows)
    except ImportError:
        return None, "asyncio"
    return uvloop.new_event_loop, "uvloop"


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Host:
    """Runs the faces and the admin endpoint of one ``tuffdb serve`` process."""

    def __init__(self, config: ServeConfig, loop_name: str = "asyncio") -> None:
        self.config = config
        self.loop_name = loop_name
        self.state = "starting"  # -> "running" -> "stopping"
        self.faces: list[Face] = []
        self.started = time.monotonic()
        self._stop = asyncio.Event()
        self._admin: AdminServer | None = None
        self.archiver: Any = None  # tuffdb.backup.archive.Archiver with --archive
        self._backup_running = False
        self.node: Any = None  # the cluster node (tuffdb.cluster.node.Node) with --cluster
        self.restart_reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- admin endpoint callbacks --------------------------------------------------

    def health(self) -> tuple[int, dict[str, Any]]:
        faces: dict[str, Any] = {}
        status = "ok" if self.state == "running" else self.state
        for face in self.faces:
            try:
                faces[face.name] = face.health()
            except Exception as exc:  # noqa: BLE001 (a broken health() is reported, not fatal)
                faces[face.name] = {"status": "degraded", "error": f"health() raised {exc!r}"}
            if status == "ok" and faces[face.name].get("status") != "ok":
                status = "degraded"
        doc: dict[str, Any] = {"status": status, "version": __version__, "pid": os.getpid(),
               "uptime_s": round(time.monotonic() - self.started, 3),
               "faces": faces}
        if self.archiver is not None:
            doc["archive"] = self.archiver.status()
            if status == "ok" and doc["archive"]["status"] != "ok":
                status = doc["status"] = "degraded"
        if self.node is not None:
            doc["cluster"] = cluster = self.node.status()
            doc["role"] = cluster["role"]
        return (200 if status == "ok" else 503), doc

    def stores(self) -> dict[str, Any]:
        """The open stores of the running faces, by data subdirectory (``kv``, ...)."""
        out: dict[str, Any] = {}
        for face in self.faces:
            stores = getattr(face, "stores", None)
            if stores is not None:
                out.update(stores())
        return out

    async def backup(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """``POST /backup`` with ``{"dest": URL, "link": false, "max_mb_per_s": null,
        "pace": true}``: back up every store; ``pace`` (the default) gives way to the
        stores' commits (storage/pacing.py), ``max_mb_per_s`` caps the rate either way."""
        from tuffdb.backup import datadir  # noqa: PLC0415 (only when asked)
        from tuffdb.backup.take import STAGING_DIR, take_backup  # noqa: PLC0415
        from tuffdb.storage.objstore import open_target  # noqa: PLC0415

        try:
            req = json.loads(body or b"{}")
            dest = req["dest"]
            rate = req.get("max_mb_per_s")
            pace = req.get("pace", True)
            if not isinstance(dest, str) or not dest or not isinstance(pace, bool) or not (
                    rate is None or (isinstance(rate, int | float) and rate > 0)):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return 400, {"error": 'the body must be JSON {"dest": "<directory or s3://...>"} '
                                  '(and optionally "link": true, "max_mb_per_s": <number>, '
                                  '"pace": false)'}
        if self.state != "running":
            return 503, {"error": f"the server is {self.state}"}
        if self._backup_running:
            return 409, {"error": "a backup is already running"}
        config = self.config
        try:
            target = open_target(dest)
            datadir.refuse_overlap(config.data_dir, target, "the backup destination")
        except ProgrammingError as exc:
            return 400, {"error": str(exc)}
        except (Error, ImportError) as exc:
            return 500, {"error": str(exc)}
        self._backup_running = True
        try:
            sources = datadir.sources_of(self.stores())
            log.info("backup started", dest=dest)
            manifest = await asyncio.to_thread(
                take_backup, sources, target, config.data_dir / STAGING_DIR,
                extra=datadir.extra_files(config.data_dir), link=bool(req.get("link")),
                max_bytes_per_s=rate * 1e6 if rate else None, pace=pace)
        except Error as exc:
            log.error("backup failed", dest=dest, error=str(exc))
            return (409 if "not empty" in str(exc) else 500), {"error": str(exc)}
        finally:
            self._backup_running = False
        log.info("backup finished", dest=dest)
        return 200, {"dest": dest, "time_ns": manifest.time_ns,
                     "stores": {n: {"time_ns": s.time_ns, "positions": s.positions,
                                    "files": len(s.files)}
                                for n, s in manifest.stores.items()}}

    def _start_archiver(self) -> None:
        from tuffdb.backup import datadir  # noqa: PLC0415
        from tuffdb.backup.archive import Archiver  # noqa: PLC0415
        from tuffdb.storage.objstore import open_target  # noqa: PLC0415

        config = self.config
        assert config.archive is not None
        try:
            target = open_target(config.archive)
            datadir.refuse_overlap(config.data_dir, target, "the archive")
        except (Error, ImportError) as exc:
            raise StartupError(f"archive {config.archive}: {exc}") from exc
        self.archiver = Archiver(
            target, datadir.sources_of(self.stores()), config.data_dir / ".archive",
            interval_s=config.archive_interval, base_interval_s=config.archive_base_interval,
            retention_s=config.archive_retention, degraded_lag_s=config.archive_lag_degraded,
            local_bytes=config.local_bytes)
        self.archiver.start()
        log.info("archiving", target=target.url, interval_s=config.archive_interval)

    def face_states(self) -> dict[str, bool]:
        up = dict.fromkeys(FACE_MODULES, False)
        up.update({face.name: self.state == "running" for face in self.faces})
        return up

    # -- lifecycle ---------------------------------------------------------------------

    def request_restart(self, reason: str) -> None:
        """From any thread: stop gracefully, then start again in place (a cluster follower
        that must load the leader's snapshot before its stores open)."""
        loop = self._loop
        if loop is None or self.restart_reason is not None:
            return
        self.restart_reason = reason
        log.warning("restarting", reason=reason)
        loop.call_soon_threadsafe(self._stop.set)

    def _on_shutdown_command(self) -> None:
        if not self._stop.is_set():
            log.info("shutdown requested", by="RESP SHUTDOWN", action="graceful shutdown")
            self._stop.set()

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._stop.is_set():
            log.error("forced exit", signal=name, exit_code=128 + signum)
            sys.stderr.flush()
            os._exit(128 + signum)
        log.info("signal received", signal=name, action="graceful shutdown")
        self._stop.set()

    def _load_face(self, name: str, module_name: str) -> Face:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise StartupError(f"face {name}: importing {module_name} failed: {exc!r}") from exc
        if not hasattr(module, "create"):
            raise StartupError(f"face {name}: {module_name} has no create(config)")
        try:
            face: Face = module.create(self.config)
        except Exception as exc:
            raise StartupError(f"face {name}: create() failed: {exc}") from exc
        return face

    async def _start(self) -> None:
        config = self.config
        try:
            config.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(f"cannot create data_dir {config.data_dir}: {exc}") from exc
        if config.admin_port:
            admin = AdminServer(config.host, config.admin_port, self.health, self.face_states,
                                self.backup, tokens=[t for t in (config.api_key,
                                                                 config.requirepass) if t],
                                protected_mode=config.protected_mode)
            try:
                await admin.start()
            except OSError as exc:
                where = _format_address(config.host, config.admin_port)
                raise StartupError(f"admin endpoint cannot listen on {where}: {exc}") from exc
            self._admin = admin
            log.info("listening", face="admin", address=admin.address)
        if config.cluster is not None:
            await self._join_cluster()
        # Every face's store opens before any face listens: a store that cannot open
        # (damaged, locked, wrong key) stops the server before a client was answered by
        # another face (it used to serve RESP for a moment, then exit).
        created: list[tuple[str, int, Face]] = []
        try:
            for name, module_name in FACE_MODULES.items():
                port = getattr(config, f"{name}_port")
                if port == 0:
                    log.info("face disabled", face=name, reason=f"{name}_port is 0")
                    continue
                created.append((name, port, self._load_face(name, module_name)))
        except BaseException:
            for _, _, face in reversed(created):
                with contextlib.suppress(Exception):
                    await face.stop()
            raise
        for i, (name, port, face) in enumerate(created):
            try:
                await face.start()
            except asyncio.CancelledError:
                # a signal interrupted start(): shutdown stops what is in self.faces
                self.faces.extend(f for _, _, f in created[i:])
                raise
            except Exception as exc:
                for _, _, f in created[i:]:
                    with contextlib.suppress(Exception):
                        await f.stop()
                where = _format_address(config.host, port)
                raise StartupError(f"face {name} cannot start on {where}: {exc}") from exc
            self.faces.append(face)
            address = getattr(face, "address", None) or _format_address(config.host, port)
            log.info("listening", face=name, address=address)
        if config.archive:
            self._start_archiver()
        if self.node is not None:
            self.node.start()

    async def _join_cluster(self) -> None:
        from tuffdb.cluster.node import Node  # noqa: PLC0415 (only with --cluster)
        from tuffdb.server.face import set_cluster_node  # noqa: PLC0415

        config = self.config
        try:
            secret = cluster_secret(config)
            if secret is None and config.protected_mode:
                log.warning("no cluster secret: in protected mode the replication port "
                            "admits nodes on this host only (set --cluster-secret on every "
                            "node)", port=config.replication_port)
            elif secret is None:
                log.warning("the replication port admits any connection: this node has no "
                            "secret to prove (set --cluster-secret on every node)",
                            port=config.replication_port)
            node = Node(config, restart=self.request_restart, secret=secret)
        except Error as exc:
            raise StartupError(f"cluster {config.cluster}: {exc}") from exc
        stores = {name: config.data_dir / sub for name, sub, port in (
            ("kv", "kv", config.resp_port), ("documents", "documents", config.http_port),
            ("events", "events", config.grpc_port)) if port}
        try:
            await asyncio.to_thread(node.bootstrap, stores)
        except Error as exc:
            raise StartupError(f"cluster {config.cluster}: cannot join through etcd "
                               f"{config.etcd}: {exc}") from exc
        self.node = node
        set_cluster_node(node)
        log.info("cluster joined", cluster=config.cluster, node=config.node_id,
                 lsn=node.state.lsn, epoch=node.state.epoch)

    async def _shutdown(self) -> int:
        self.state = "stopping"
        log.info("stopping", faces=[face.name for face in reversed(self.faces)])
        code = 0
        if self.node is not None:
            # First: a leader hands its key back, so the others elect at once.
            await asyncio.to_thread(self.node.stop)
        if self.archiver is not None:  # ships what is pending while the stores are open
            await asyncio.to_thread(self.archiver.stop)
        for face in reversed(self.faces):
            try:
                await face.stop()
            except Exception as exc:  # keep stopping the others; the exit code reports it
                log.exception("face stop failed", face=face.name, error=repr(exc))
                code = 1
            else:
                log.info("face stopped", face=face.name)
        if self.node is not None and code == 0:
            await asyncio.to_thread(self.node.settle)
        if self._admin is not None:
            await self._admin.stop()
        return code

    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        set_shutdown_handler(self._on_shutdown_command)
        log.info("starting", version=__version__, pid=os.getpid(), loop=self.loop_name,
                 python=sys.version.split()[0])
        log.info("config", **redacted(self.config))
        code = 0
        starting = asyncio.ensure_future(self._start())
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            # A signal during a face's start(): cancel it and shut down what is up.
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, StartupError):
                await starting
            log.warning("startup interrupted", started=[face.name for face in self.faces])
        elif isinstance(starting.exception(), StartupError):
            log.error("startup failed", error=str(starting.exception()))
            code = 1
        else:
            starting.result()  # re-raises a bug in the host itself
            self.state = "running"
            log.info("ready", pid=os.getpid(),
                     faces=[face.name for face in self.faces],
                     admin=self._admin.address if self._admin else None)
            await stopping
        stopping.cancel()
        code = max(code, await self._shutdown())
        log.info("stopped", exit_code=code)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        set_shutdown_handler(None)
        return code


def run(config: ServeConfig) -> int:
    """Serve until a signal arrives; return the process exit code."""
    configure(config.log_level)
    lifecycle = logging.getLogger(LIFECYCLE_LOGGER)
    lifecycle.setLevel(min(logging.INFO, lifecycle.getEffectiveLevel()))
    tune_gc()
    raise_open_file_limit()
    factory, loop_name = loop_factory()
    host = Host(config, loop_name)
    with asyncio.Runner(loop_factory=factory) as runner:
        code = runner.run(host.run())
    if host.restart_reason is not None and code == 0:
        # Start again in place: same pid, same arguments, fresh stores.
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return code
