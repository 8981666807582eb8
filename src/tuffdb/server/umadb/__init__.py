"""The event face over UmaDB's gRPC protocol (``umadb.v1.DCB``).

``create(config)`` returns the face that ``tuffdb serve`` drives (``tuffdb.server.face``);
``python -m tuffdb.server.umadb`` runs this face alone. Layout: ``grpc_h2`` (our HTTP/2 +
gRPC framing) with ``hpack_codec`` (header compression), ``wire`` (``umadb.v1`` messages
<-> the event store, the error table), ``service`` (the RPC handlers), ``tuning`` (the
batch thread's settings), ``server`` (binding to a port, the face object, standalone main),
``health_v1_pb2`` (``grpc.health.v1``). The ``umadb.v1`` messages themselves live with the
event store (``tuffdb.events.umadb_v1_pb2``): the stored form of an event is one of them.
"""

from __future__ import annotations

from typing import Any


def create(config: Any) -> Any:
    """Open the store under ``config.data_dir / "events"`` and return the (unstarted) face."""
    from tuffdb.server.umadb.server import create as create_face  # noqa: PLC0415 (lazy)

    return create_face(config)


__all__ = ["create"]
