"""The KV face over the Redis protocol (RESP2 and RESP3).

``create(config)`` returns the :class:`RespFace` that ``tuffdb serve`` drives (see
``tuffdb.server.face``); ``python -m tuffdb.server.resp`` runs this face alone.
Layout: ``parser`` (bytes -> commands), ``reply`` (RESP2/RESP3 encoders), ``conn``
(one asyncio.Protocol per client: batches, group commit, back-pressure), ``server``
(shared state and lifecycle), ``table`` + ``commands/`` (the handlers), ``values``
(how Redis types sit in the bytes -> bytes engine), ``pubsub``, ``glob``.
"""

from __future__ import annotations

from typing import Any

from tuffdb.server.resp import commands as _commands  # noqa: F401  (registers handlers)
from tuffdb.server.resp.server import RespServer


class RespFace:
    """The face object for ``tuffdb serve``: start, stop, health."""

    name = "resp"

    def __init__(self, config: Any) -> None:
        self.server = RespServer(config)

    async def start(self) -> None:
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()

    def health(self) -> dict[str, Any]:
        return self.server.health()

    def stores(self) -> dict[str, Any]:
        return self.server.stores()


def create(config: Any) -> RespFace:
    """Open the store under ``config.data_dir / "kv"`` and return the (unstarted) face."""
    return RespFace(config)


__all__ = ["RespFace", "create"]
