"""ekoDB REST face: documents over HTTP/1.1 for ekodb-client (see docs/guides/documents.md).

``create(config)`` opens the documents store under ``config.data_dir / "documents"``
with encryption at rest on by default: the key comes from the host's
``encryption_key_file`` / ``TUFFDB_ENCRYPTION_KEY``, else from ``documents.key`` in the
data directory (32 random bytes, created 0600 on first start). On the first start with
no API keys (and no ``api_key`` in the config, which becomes an admin key) an admin key is
created, printed once to stderr and written to
``ekodb_admin_key`` (0600) in the data directory. Settings (``/api/config``) persist in
``ekodb_config.json`` in the data directory; ``[http]`` TOML keys of the same names set
their initial values.

Standalone, until ``tuffdb serve`` hosts it::

    python -m tuffdb.server.ekodb --port 8080 --data-dir D   # --port 0: any free port

prints ``ekodb_http ready on HOST:PORT`` to stderr once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import secrets
import signal
import sys
import uuid
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tuffdb.documents.database import BLOCK_BYTES, Database
from tuffdb.log import configure as configure_logging
from tuffdb.log import get_logger
from tuffdb.security.auth import KeyRing
from tuffdb.server.face import cluster_node
from tuffdb.server.busy_poll import DEFAULT_WINDOW_US, BusyPoll
from tuffdb.server.ekodb.app import App, Settings
from tuffdb.server.ekodb.proto import HttpProtocol
from tuffdb.storage.files import write_file_durably

_log = get_logger(__name__)

KEY_FILE = "documents.key"
ADMIN_KEY_FILE = "ekodb_admin_key"
SETTINGS_FILE = "ekodb_config.json"
# storage_mode -> memory: (engine hot_bytes, engine cache_bytes, read cache bytes). "fast"
# caches a working set of up to 1 GiB of decoded blocks and 512 MiB of stored records with
# their encoded replies (~200,000 YCSB records); "balanced" keeps the defaults.
STORAGE_MODES = {"fast": (64 << 20, 1 << 30, 512 << 20),
                 "balanced": (8 << 20, 64 << 20, 256 << 20)}


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _configured_key(config: Any) -> bytes | None:
    from tuffdb.server.config import encryption_key  # noqa: PLC0415

    return encryption_key(config) if hasattr(config, "encryption_key_file") else None


def _data_key(config: Any, data_dir: Path) -> bytes:
    key = _configured_key(config)
    if key is not None:
        return key
    path = data_dir / KEY_FILE
    if not path.exists():
        _write_private(path, secrets.token_bytes(32))
    raw = path.read_bytes()
    if len(raw) != 32:
        from tuffdb.errors import WrongKeyError  # noqa: PLC0415

        raise WrongKeyError(f"{path} must hold exactly 32 bytes; restore it from your backup")
    return raw


def encrypted_id_factory(key: bytes) -> Any:
    """ekoDB-style ids: AES-GCM of a UUID, url-safe base64 (86 characters)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415

    aead = AESGCM(hashlib.sha256(b"tuffdb ekodb ids\x00" + key).digest())

    def new_id() -> str:
        nonce = secrets.token_bytes(12)
        sealed = nonce + aead.encrypt(nonce, str(uuid.uuid4()).encode(), None)
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    return new_id


class EkoDBFace:
    name = "http"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = self._load_settings(dict((getattr(config, "extra", None) or {}).get("http", {})))  # noqa: E501
        if cluster_node() is not None and _configured_key(config) is None:
            from tuffdb.errors import ProgrammingError  # noqa: PLC0415 - cold path

            raise ProgrammingError(
                "in a cluster the documents face needs the same encryption key on every node "
                "(the leader's log is shipped encrypted): give --encryption-key-file or "
                "TUFFDB_ENCRYPTION_KEY")
        key = _data_key(config, self.data_dir)
        self.id_factory = encrypted_id_factory(key)
        from tuffdb.kv.store import KVStore  # noqa: PLC0415 - late: the host may skip this face

        durability = "always" if self.settings.durable_operations else config.durability
        kv = KVStore.open(self.data_dir / "documents", durability=durability,
                          interval_ms=config.interval_ms, encryption_key=key,
                          hot_bytes=STORAGE_MODES[self.settings.storage_mode][0],
                          cache_bytes=STORAGE_MODES[self.settings.storage_mode][1],
                          tier_cache_bytes=int(getattr(config, "tier_cache_mb", 256)) << 20,
                          block_bytes=BLOCK_BYTES)
        self.db = Database(kv, sync=False)
        node = cluster_node()
        # In a cluster nothing is written here until this node leads (a follower's store
        # holds exactly the leader's writes): keys and the signing secret come from the
        # leader, and the first leader creates them (_on_promote).
        self.keyring = KeyRing(kv, sync=None, read_only=node is not None)
        self.admin_key: str | None = None
        if node is None:
            self._first_keys()
        else:
            from tuffdb.cluster.appliers import KVApplier  # noqa: PLC0415 (only in a cluster)
            from tuffdb.cluster.node import Attached  # noqa: PLC0415

            keyring = self.keyring
            self.db.replica_listeners.append(
                lambda keys: keyring.reload() if any(map(keyring.stored_under, keys)) else None)
            node.attach(Attached("documents", kv, KVApplier(self.db, kv),
                                 on_promote=self._on_promote))
        self.app = App(self.db, self.keyring, self.settings, self._save_settings)
        self.app.reads.limit = STORAGE_MODES[self.settings.storage_mode][2]
        self._apply_settings()
        self.server: asyncio.Server | None = None
        self.port: int | None = None
        self._stopped = False

    def _first_keys(self) -> None:
        """The configured API key, and on the very first start an admin key."""
        configured = getattr(self.config, "api_key", None)
        if configured and self.keyring.find(configured) is None:
            self.keyring.create(label="configured", description="from the api_key setting",
                                is_admin=True, secret=configured)
        if not self.keyring.api_keys():
            admin = self.keyring.create(label="admin", description="created on first start",
                                        is_admin=True)
            self.admin_key = admin.key
            _write_private(self.data_dir / ADMIN_KEY_FILE, admin.key.encode() + b"\n")
            # Shown once, as one structured log line like every other event of the host.
            _log.warning("admin API key created (shown once)", key=admin.key,
                         file=str(self.data_dir / ADMIN_KEY_FILE))

    def _on_promote(self) -> None:
        """This node now leads: finish interrupted multi-key writes, make sure the signing
        secret and the first keys exist (they are replicated to the followers)."""
        self.db.replay_intents()
        self.keyring.ensure_secret()
        self._first_keys()

    def _load_settings(self, initial: dict[str, Any]) -> Settings:
        s = Settings()
        known = {f.name for f in fields(Settings)}
        s.update({k: v for k, v in initial.items() if k in known})
        path = self.data_dir / SETTINGS_FILE
        if path.exists():
            s.update(json.loads(path.read_text()))
        return s

    def _save_settings(self) -> None:
        # temp file, fsync, rename, fsync the directory: a power cut leaves the old
        # settings or the new ones, never an empty file (tests/crash/test_ekodb_crash.py)
        write_file_durably(self.data_dir / SETTINGS_FILE,
                           json.dumps(asdict(self.settings), indent=1).encode())
        self._apply_settings()

    def _apply_settings(self) -> None:
        s = self.settings
        self.db.default_ttl = float(s.default_ttl) or None
        self.db.id_factory = self.id_factory if s.encrypt_ids else None
        want = "always" if s.durable_operations else self.config.durability
        kv = self.db.kv
        if hasattr(kv, "set_durability") and getattr(kv, "durability", want) != want:
            kv.set_durability(want)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        window = float(os.environ.get("TUFFDB_BUSY_POLL_US", DEFAULT_WINDOW_US))
        poller = BusyPoll(window, self.app.idle_for_spin) if window > 0 else None
        self.server = await loop.create_server(
            lambda: HttpProtocol(self.app.handle, poller=poller),
            self.config.host, self.config.http_port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5)
        self.app.close()
        self.db.close()

    def stores(self) -> dict[str, Any]:
        """This face's store by data subdirectory (backup and archiving read it)."""
        return {"documents": self.db.kv}

    def health(self) -> dict[str, Any]:
        poisoned = self.db.kv.poisoned
        return {"status": "degraded" if poisoned else "ok", "port": self.port,
                "collections": len(self.db.collections()),
                **({"reason": f"writes refused until a restart: {poisoned!r}"} if poisoned else {})}


def create(config: Any) -> EkoDBFace:
    """The face for ``tuffdb serve`` (see server/face.py)."""
    return EkoDBFace(config)


async def _serve(config: Any) -> None:
    face = create(config)
    await face.start()
    print(f"ekodb_http ready on {config.host}:{face.port}", file=sys.stderr, flush=True)  # noqa: T201 - the one-time key and ready line are meant for the operator
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    await face.stop()


def main(argv: list[str] | None = None) -> None:
    from tuffdb.server.config import ServeConfig  # noqa: PLC0415

    p = argparse.ArgumentParser(prog="python -m tuffdb.server.ekodb")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--durability", default="interval", choices=("always", "interval", "none"))
    p.add_argument("--http-setting", action="append", default=[], metavar="NAME=JSON",
                   help="initial /api/config value, e.g. rate_limit_per_minute=30")
    args = p.parse_args(argv)
    configure_logging()
    extra = {k: json.loads(v) for k, _, v in (s.partition("=") for s in args.http_setting)}
    config = ServeConfig(data_dir=args.data_dir, host=args.host, http_port=args.port,
                         durability=args.durability, extra={"http": extra})
    from tuffdb.server.app import loop_factory, tune_gc  # noqa: PLC0415 - as tuffdb serve runs

    tune_gc()
    factory, _ = loop_factory()  # uvloop where installed, as under `tuffdb serve`
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve(config))

