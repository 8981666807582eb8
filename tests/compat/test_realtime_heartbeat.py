"""Heartbeats: the WebSocket face pings and the SSE face sends ``event: heartbeat`` on a
period (15 s in production; shortened here by setting the module constants on an
in-process server). The test waits for the frame; it asserts nothing about timing."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import TYPE_CHECKING

import httpx
import pytest

from tuffdb.server.ekodb import sse as ekodb_sse
from tuffdb.server.ekodb import ws as ekodb_ws
from tuffdb.server.config import ServeConfig
from tuffdb.server.ekodb.server import ADMIN_KEY_FILE, EkoDBFace

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

WAIT = 30


@pytest.fixture(autouse=True)
def fast_heartbeats(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(ekodb_sse, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(ekodb_ws, "HEARTBEAT_SECONDS", 0.05)
    return


async def _started(tmp_path: Path) -> tuple[EkoDBFace, str]:
    face = EkoDBFace(ServeConfig(data_dir=tmp_path, http_port=0))
    await face.start()
    key = (tmp_path / ADMIN_KEY_FILE).read_text().strip()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{face.port}") as http:
        token = (await http.post("/api/auth/token", json={"api_key": key})).json()["token"]
    return face, token


def test_sse_sends_heartbeat_blocks(tmp_path: Path) -> None:
    async def run() -> None:
        face, token = await _started(tmp_path)
        try:
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{face.port}", timeout=WAIT) as http,
                http.stream(
                    "GET", "/api/subscribe/c", headers={"Authorization": f"Bearer {token}"}
                ) as s,
            ):
                lines = s.aiter_lines()

                async def heartbeat() -> str:
                    async for line in lines:
                        if line == "event: heartbeat":
                            return await anext(lines)
                    raise AssertionError("stream ended")

                data = await asyncio.wait_for(heartbeat(), WAIT)
                assert data.startswith('data: {"timestamp":"')
        finally:
            await face.stop()

    asyncio.run(run())


def test_websocket_sends_pings(tmp_path: Path) -> None:
    async def run() -> None:
        face, token = await _started(tmp_path)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", face.port)
            nonce = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                (
                    f"GET /api/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                    f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
                ).encode()
            )
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
            assert head.startswith(b"HTTP/1.1 101")
            first = await asyncio.wait_for(reader.readexactly(2), WAIT)
            assert first[0] == 0x89  # FIN + ping: nothing else is sent before a Hello
            writer.close()
        finally:
            await face.stop()

    asyncio.run(run())
