"""The contract between ``tuffdb serve`` (``server/app.py``) and each protocol face.

A face package (``tuffdb.server.resp``, ``tuffdb.server.umadb``,
``tuffdb.server.ekodb``) exposes ``create(config: ServeConfig) -> Face``.
``create`` opens the face's store under ``config.data_dir / <face name>`` and may
raise :class:`tuffdb.errors.Error` with a message saying what to fix.

Lifecycle, driven by the host on one asyncio event loop (uvloop when available):

1. ``await face.start()`` binds the listening socket(s) and starts accepting.
   A bind failure raises ``OSError``; the host then stops the faces it already
   started and exits non-zero.
2. On SIGTERM/SIGINT the host calls ``await face.stop()`` on every face (reverse
   start order): stop accepting, finish in-flight requests (bounded by a grace
   period), then fsync and close the store. ``stop`` must be idempotent.
3. ``face.health()`` returns a small JSON-able dict for ``GET /health`` on the
   admin port (at least ``{"status": "ok" | "degraded", ...}``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

# The cluster node of this process (``tuffdb.cluster.node.Node``), set by the host before
# it creates the faces when ``--cluster`` is given, None otherwise. A face attaches its
# store to it in ``create`` and asks it, per write, whether this node may take writes.
_CLUSTER_NODE: Any = None


def cluster_node() -> Any:
    """This process's cluster node, or None when it is not in a cluster."""
    return _CLUSTER_NODE


def set_cluster_node(node: Any) -> None:
    global _CLUSTER_NODE  # noqa: PLW0603 - one node per process, set by the host
    _CLUSTER_NODE = node


# How a face asks the process to stop as a signal would (RESP's SHUTDOWN), set by the host
# that owns the process (``tuffdb serve``, ``python -m tuffdb.server.resp``); None when a
# face is embedded in someone else's process, which only its owner may stop.
_SHUTDOWN: Callable[[], None] | None = None


def set_shutdown_handler(handler: Callable[[], None] | None) -> None:
    global _SHUTDOWN  # noqa: PLW0603 - one host per process
    _SHUTDOWN = handler


def request_shutdown() -> bool:
    """Ask the host to shut the process down gracefully (called on the event loop);
    False when there is no host to ask."""
    if _SHUTDOWN is None:
        return False
    _SHUTDOWN()
    return True


class Face(Protocol):
    name: str  # "resp" | "grpc" | "http"

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def health(self) -> dict[str, Any]: ...
