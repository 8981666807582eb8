"""tuffdb: one storage core, three faces (KV over RESP, DCB events over gRPC, documents over REST)."""

from tuffdb._version import __version__
from tuffdb.errors import (
    ClosedError,
    CorruptionError,
    Error,
    LimitExceeded,
    NotFoundError,
    PoisonedError,
    WrongKeyError,
)
from tuffdb.kv.store import KVStore

__all__ = [
    "ClosedError",
    "CorruptionError",
    "Error",
    "KVStore",
    "LimitExceeded",
    "NotFoundError",
    "PoisonedError",
    "WrongKeyError",
    "__version__",
]
