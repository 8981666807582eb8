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


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_cert_and_key_make_the_port_speak_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)

    async def main() -> None:
        face = create(ServeConfig(data_dir=tmp_path / "d", resp_port=0, tls_cert=cert,
                                  tls_key=key))
        await face.start()
        assert face.health()["tls"] is True
        c = aioredis.Redis(port=face.health()["port"], ssl=True, ssl_cert_reqs="none")
        assert await c.set("k", "v")
        assert await c.get("k") == b"v"
        await c.aclose()
        await face.stop()

    asyncio.run(main())
