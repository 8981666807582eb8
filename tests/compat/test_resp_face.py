"""The RESP face through the host contract (server/face.py), in-process.

``tuffdb serve`` imports ``tuffdb.server.resp``, calls ``create(config)``, awaits
``start()``, asks ``health()`` and awaits ``stop()`` (idempotent). These tests drive that
sequence with a real ServeConfig, a real store and a real redis-py asyncio client.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import redis.asyncio as aioredis

from tuffdb.server.config import ServeConfig
from tuffdb.server.resp import create


def test_face_lifecycle_health_and_store_location(tmp_path: Path) -> None:
    async def main() -> None:
        face = create(ServeConfig(data_dir=tmp_path, resp_port=0, durability="always"))
        assert face.name == "resp"
        await face.start()
        port = face.health()["port"]
        assert face.health()["status"] == "ok"
        assert face.health()["appendfsync"] == "always"
        c = aioredis.Redis(port=port)
        assert await c.set("k", "v")
        assert (await c.info("clients"))["connected_clients"] == 1
        await c.aclose()
        await face.stop()
        await face.stop()  # idempotent

    asyncio.run(main())
    assert (tmp_path / "kv").is_dir()


def test_resp_section_of_the_config_sets_appendfsync_and_limits(tmp_path: Path) -> None:
    async def main() -> None:
        config = ServeConfig(data_dir=tmp_path, resp_port=0, durability="always",
                             requirepass="pw", extra={"resp": {"appendfsync": "everysec",
                                                               "timeout": 30}})
        face = create(config)
        await face.start()
        c = aioredis.Redis(port=face.health()["port"], password="pw")
        assert await c.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert await c.config_get("timeout") == {"timeout": "30"}
        await c.aclose()
        await face.stop()

    asyncio.run(main())


def test_stop_answers_clients_then_closes_them(tmp_path: Path) -> None:
    async def main() -> None:
        face = create(ServeConfig(data_dir=tmp_path, resp_port=0))
        await face.start()
        c = aioredis.Redis(port=face.health()["port"])
        await c.set("k", "v")
        await face.stop()
        try:
            await c.get("k")
        except (ConnectionError, aioredis.ConnectionError):
            pass
        else:
            raise AssertionError("the connection should be closed after stop()")
        finally:
            await c.aclose()

    asyncio.run(main())
    # the data is durable after a clean stop
    async def reopen() -> bytes | None:
        face = create(ServeConfig(data_dir=tmp_path, resp_port=0))
        await face.start()
        c = aioredis.Redis(port=face.health()["port"])
        value = await c.get("k")
        await c.aclose()
        await face.stop()
        return value

    assert asyncio.run(reopen()) == b"v"
