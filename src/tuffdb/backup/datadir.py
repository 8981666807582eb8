"""The layout of a ``tuffdb serve`` data directory, as backup and restore see it.

Each face keeps its store in a subdirectory: ``kv`` (the RESP face's KVStore),
``events`` (the gRPC face's EventStore), ``documents`` (the ekoDB face's KVStore,
always encrypted: with the configured key, else with ``documents.key`` from the data
directory). Small server files beside them (``ekodb_config.json``) are copied too.
Secrets are never copied into a backup: ``documents.key`` and ``ekodb_admin_key``
stay with the operator (docs/guides/backup.md says how to keep them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuffdb.errors import ProgrammingError, WrongKeyError
from tuffdb.storage.codec import key_id

#: Store subdirectory -> kind of store.
STORES = {"kv": "kv", "events": "events", "documents": "kv"}
DOCUMENTS_KEY_FILE = "documents.key"  # the ekoDB face's KEY_FILE
EXTRA_FILES = ("ekodb_config.json",)
SECRET_FILES = (DOCUMENTS_KEY_FILE, "ekodb_admin_key")
KEY_SIZE = 32


@dataclass
class Keys:
    """Encryption keys: ``configured`` (the server's key: every store, when set) and
    ``documents`` (the documents store's own key when none is configured)."""

    configured: bytes | None = None
    documents: bytes | None = None

    def for_store(self, name: str) -> bytes | None:
        if self.configured is not None:
            return self.configured
        return self.documents if name == "documents" else None

    @classmethod
    def of_data_dir(cls, data_dir: Path, configured: bytes | None,
                    documents_key_file: Path | None = None) -> Keys:
        """The keys a data directory's stores open with (the documents key read from
        ``documents_key_file``, else from the data directory itself)."""
        path = documents_key_file or (data_dir / DOCUMENTS_KEY_FILE)
        documents = None
        if configured is None and path.exists():
            documents = path.read_bytes()
            if len(documents) != KEY_SIZE:
                raise WrongKeyError(f"{path} must hold exactly {KEY_SIZE} bytes")
        return cls(configured, documents)


def stores_in(data_dir: Path) -> list[str]:
    """The store subdirectories present in ``data_dir``."""
    return [name for name in STORES if (data_dir / name).is_dir()]


def open_store(kind: str, path: Path, key: bytes | None) -> Any:
    """Open a store of ``kind`` at ``path`` (it takes the directory's lock)."""
    if kind == "events":
        from tuffdb.events.store import EventStore  # noqa: PLC0415

        return EventStore.open(path, encryption_key=key)
    if kind == "kv":
        from tuffdb.kv.store import KVStore  # noqa: PLC0415

        return KVStore.open(path, encryption_key=key)
    raise ProgrammingError(f"unknown store kind {kind!r}")


def store_key_id(key: bytes | None) -> int:
    return key_id(key) if key else 0


def sources_of(stores: dict[str, Any]) -> list[Any]:
    """Backup sources for open stores keyed by subdirectory name (``kv``, ...)."""
    from tuffdb.backup.take import Source  # noqa: PLC0415

    return [Source(name, STORES[name], store.shipper, store.key_id)
            for name, store in stores.items() if name in STORES]


def extra_files(data_dir: Path) -> list[tuple[str, Path]]:
    return [(n, data_dir / n) for n in EXTRA_FILES if (data_dir / n).is_file()]
