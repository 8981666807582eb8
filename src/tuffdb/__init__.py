"""tuffdb: one storage core, three faces (KV over RESP, DCB events over gRPC, documents over REST).

``tuffdb.KVStore`` is imported eagerly; the event store and document database names are
resolved on first use, so ``import tuffdb`` stays cheap for KV-only programs.
"""

from __future__ import annotations

from typing import Any

from tuffdb import _native

_native.activate(__path__)  # first: later submodules load from the compiled build if any

from tuffdb._version import __version__  # noqa: E402
from tuffdb.errors import (  # noqa: E402
    AuthError,
    ClosedError,
    ConflictError,
    CorruptionError,
    Error,
    IntegrityError,
    LimitExceeded,
    LockTimeout,
    NotFoundError,
    PermissionDeniedError,
    PoisonedError,
    ProgrammingError,
    ProtocolError,
    VersionMismatchError,
    WrongKeyError,
)
from tuffdb.kv.store import KVStore  # noqa: E402

_LAZY = {
    "AppendCondition": "tuffdb.events",
    "Event": "tuffdb.events",
    "EventStore": "tuffdb.events",
    "Query": "tuffdb.events",
    "QueryItem": "tuffdb.events",
    "SequencedEvent": "tuffdb.events",
    "TrackingInfo": "tuffdb.events",
    "Collection": "tuffdb.documents",
    "Database": "tuffdb.documents",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tuffdb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AppendCondition",
    "AuthError",
    "ClosedError",
    "Collection",
    "ConflictError",
    "CorruptionError",
    "Database",
    "Error",
    "Event",
    "EventStore",
    "IntegrityError",
    "KVStore",
    "LimitExceeded",
    "LockTimeout",
    "NotFoundError",
    "PermissionDeniedError",
    "PoisonedError",
    "ProgrammingError",
    "ProtocolError",
    "Query",
    "QueryItem",
    "SequencedEvent",
    "TrackingInfo",
    "VersionMismatchError",
    "WrongKeyError",
    "__version__",
]
