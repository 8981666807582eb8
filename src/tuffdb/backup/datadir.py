"""The layout of a ``tuffdb serve`` data directory, as backup and restore see it.

Each face keeps its store in a subdirectory: ``kv`` (the RESP face's KVStore),
``events`` (the gRPC face's EventStore), ``documents`` (the ekoDB face's KVStore,
always encrypted: with the configured key, else with ``documents.key`` from the data
directory). Small server files beside them (``ekodb_config.json``) are copied too.
Secrets are never copied into a backup: ``documents.key`` and ``ekodb_admin_key``
stay with the operator (docs/guides/backup.md says how to keep them).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuffdb._format.segment import SEGMENT_HEADER_SIZE, unpack_header
from tuffdb.errors import ProgrammingError, WrongKeyError
from tuffdb.storage.codec import key_id
from tuffdb.storage.lock import DirLock

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Store subdirectory -> kind of store.
STORES = {"kv": "kv", "events": "events", "documents": "kv"}
DOCUMENTS_KEY_FILE = "documents.key"  # the ekoDB face's KEY_FILE
EXTRA_FILES = ("ekodb_config.json",)
SECRET_FILES = (DOCUMENTS_KEY_FILE, "ekodb_admin_key")
KEY_SIZE = 32


def refuse_overlap(data_dir: Path, target: Any, what: str) -> None:
    """A backup or archive ``target`` (an object store) that is a directory inside
    ``data_dir``, or holds it, is refused: its files would land in the stores it copies
    (a backup into ``data/kv/b`` left ``tuffdb check`` finding an unknown file in the KV
    store) or be copied into themselves.

    :raises ProgrammingError: naming both.
    """
    root = getattr(target, "root", None)
    if root is None:  # not a directory (s3://...)
        return
    dest, data = Path(root).resolve(), Path(data_dir).resolve()
    if dest == data or data in dest.parents or dest in data.parents:
        raise ProgrammingError(f"{what} {dest} overlaps the data directory {data}: give a "
                               "directory outside it (and not one that holds it)")


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

    return [Source(name, STORES[name], store.shipper, store.key_id, store)
            for name, store in stores.items() if name in STORES]


class LockedSource:
    """A closed store's directory held by its lock, for the shipping seam: nothing can
    change it, so the pause is empty and the state is what the directory lists. An
    offline backup copies it without opening the store (no recovery, no key tables:
    the restored copy's first open does what this one's would have)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.kind = kind
        self._lock = DirLock(path)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        yield

    def state(self) -> tuple[list[str], dict[str, int]]:
        if self.kind == "events":
            from tuffdb.events.shipping_source import list_state  # noqa: PLC0415

            return list_state(self.path)
        from tuffdb.kv.shipping_source import list_state as kv_state  # noqa: PLC0415

        return kv_state(self.path, {})

    def remote(self) -> dict[str, Any]:
        if self.kind == "events":
            return {}
        from tuffdb.kv.tier import stubs_in  # noqa: PLC0415

        return stubs_in(self.path)

    def key_id(self) -> int:
        """The key id the store's files carry (from the first file's header; 0 if none)."""
        files, logs = self.state()
        for name in [*files, *logs]:
            with (self.path / name).open("rb") as f:
                return unpack_header(f.read(SEGMENT_HEADER_SIZE), str(self.path / name)).key_id
        return 0

    def release(self) -> None:
        self._lock.release()


def locked_sources(data_dir: Path) -> tuple[list[Any], list[LockedSource]]:
    """Backup sources for the stores of a data directory no server has open; the
    caller releases the locks (the second list) when done.

    :raises LockTimeout: a store is in use.
    """
    from tuffdb.backup.take import Source  # noqa: PLC0415
    from tuffdb.storage.shipping import Shipper  # noqa: PLC0415

    held: list[LockedSource] = []
    try:
        for name in stores_in(data_dir):
            held.append(LockedSource(data_dir / name, STORES[name]))
    except BaseException:
        for src in held:
            src.release()
        raise
    return [Source(src.path.name, src.kind, Shipper(src.path, src), src.key_id())
            for src in held], held


def extra_files(data_dir: Path) -> list[tuple[str, Path]]:
    return [(n, data_dir / n) for n in EXTRA_FILES if (data_dir / n).is_file()]
