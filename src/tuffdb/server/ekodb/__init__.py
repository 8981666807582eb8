"""The document face over ekoDB's REST, WebSocket and SSE API.

``create(config)`` returns the face that ``tuffdb serve`` drives (``tuffdb.server.face``);
``python -m tuffdb.server.ekodb`` runs this face alone. Layout: ``proto`` (the HTTP/1.1
protocol: parsing, responses, keep-alive), ``app`` (routing, auth, the request context),
``data`` / ``admin`` / ``search`` (the handlers), ``ws`` and ``sse`` (real-time), ``wire``
and ``body`` (MessagePack/JSON replies and their splicing), ``read_cache`` (the by-id reply
cache), ``server`` (the face object, its settings and the standalone main).
"""

from __future__ import annotations

from typing import Any


def create(config: Any) -> Any:
    """Open the store under ``config.data_dir / "documents"`` and return the (unstarted) face."""
    from tuffdb.server.ekodb.server import create as create_face  # noqa: PLC0415 (lazy)

    return create_face(config)


__all__ = ["create"]
